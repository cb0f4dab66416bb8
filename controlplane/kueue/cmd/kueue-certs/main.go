// kueue-certs writes the webhook certificates Kueue's manager is given on the local
// control plane: a CA and a serving certificate in the shape Kueue's internal certificate
// management (github.com/open-policy-agent/cert-controller pkg/rotator, used by
// sigs.k8s.io/kueue pkg/util/cert) accepts as valid and keeps:
//
//   - ca.crt, ca.key: an RSA CA, key in PKCS#1 (the rotator parses the CA key with
//     x509.ParsePKCS1PrivateKey), DNS name "kueue-ca" (the rotator verifies the CA
//     against its own CAName);
//   - tls.crt, tls.key: a serving certificate signed by it for the DNS name
//     <service>.<namespace>.svc (what the rotator verifies) and for 127.0.0.1 (what the
//     API server dials: the webhooks are URL-based, the cluster has no kube-proxy).
//
// Both are valid for one year, past the rotator's 90-day look-ahead, so it never
// replaces them. Usage: kueue-certs -dir DIR [-service NAME] [-namespace NS].
package main

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"flag"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

func main() {
	dir := flag.String("dir", "", "directory to write ca.crt, ca.key, tls.crt, tls.key into")
	service := flag.String("service", "kueue-webhook-service", "webhook Service name")
	namespace := flag.String("namespace", "kueue-system", "Kueue's namespace")
	flag.Parse()
	if *dir == "" {
		fmt.Fprintln(os.Stderr, "kueue-certs: -dir is required")
		os.Exit(2)
	}
	if err := write(*dir, *service, *namespace); err != nil {
		fmt.Fprintln(os.Stderr, "kueue-certs:", err)
		os.Exit(1)
	}
}

func pemFile(path, kind string, der []byte, mode os.FileMode) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), mode)
}

func write(dir, service, namespace string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	now := time.Now()
	begin, end := now.Add(-5*time.Minute), now.Add(365*24*time.Hour)
	caKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "kueue-ca", Organization: []string{"kueue"}},
		DNSNames:              []string{"kueue-ca"},
		NotBefore:             begin,
		NotAfter:              end,
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment | x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDer, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return err
	}
	ca, err := x509.ParseCertificate(caDer)
	if err != nil {
		return err
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	dns := fmt.Sprintf("%s.%s.svc", service, namespace)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: dns},
		DNSNames:     []string{dns},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		NotBefore:    begin,
		NotAfter:     end,
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return err
	}
	for _, f := range []struct {
		name, kind string
		der        []byte
		mode       os.FileMode
	}{
		{"ca.crt", "CERTIFICATE", caDer, 0o644},
		{"ca.key", "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(caKey), 0o600},
		{"tls.crt", "CERTIFICATE", der, 0o644},
		{"tls.key", "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(key), 0o600},
	} {
		if err := pemFile(filepath.Join(dir, f.name), f.kind, f.der, f.mode); err != nil {
			return err
		}
	}
	return nil
}
