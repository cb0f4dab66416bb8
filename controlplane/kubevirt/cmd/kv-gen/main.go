// kv-gen prints what virt-operator would install for virt-api and virt-controller, taken
// from KubeVirt's own generator packages, as one JSON object per line:
//
//   - the CRDs of install.GenerateCurrentInstallStrategy plus the KubeVirt CRD
//     (kubevirt.io/kubevirt pkg/virt-operator/resource/generate/install/strategy.go,
//     components/crds.go);
//   - the ServiceAccounts, ClusterRoles, Roles and bindings of virt-api and virt-controller
//     (pkg/virt-operator/resource/generate/rbac: GetAllCluster, GetAllApiServer,
//     GetAllController);
//   - virt-api's mutating and validating webhook configurations
//     (components/webhooks.go), each `service:` reference turned into
//     `url: https://<addr><path>` with the given CA bundle: gpuwl's local control plane
//     has no kube-proxy, so a Service address would not route.
//
// gpuwl runs it once per `gpuwl cluster up --kubevirt` and applies every object.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"kubevirt.io/kubevirt/pkg/virt-operator/resource/generate/components"
	"kubevirt.io/kubevirt/pkg/virt-operator/resource/generate/rbac"
)

// crdFuncs is the list in install.GenerateCurrentInstallStrategy plus NewKubeVirtCrd
// (virt-operator creates that one itself before the strategy runs).
var crdFuncs = []func() (*extv1.CustomResourceDefinition, error){
	components.NewVirtualMachineInstanceCrd, components.NewPresetCrd, components.NewReplicaSetCrd,
	components.NewVirtualMachineCrd, components.NewVirtualMachineInstanceMigrationCrd,
	components.NewVirtualMachineSnapshotCrd, components.NewVirtualMachineSnapshotContentCrd,
	components.NewVirtualMachineRestoreCrd, components.NewVirtualMachineInstancetypeCrd,
	components.NewVirtualMachineClusterInstancetypeCrd, components.NewVirtualMachinePoolCrd,
	components.NewMigrationPolicyCrd, components.NewVirtualMachinePreferenceCrd,
	components.NewVirtualMachineClusterPreferenceCrd, components.NewVirtualMachineExportCrd,
	components.NewVirtualMachineCloneCrd, components.NewKubeVirtCrd,
}

func fail(format string, a ...interface{}) {
	fmt.Fprintf(os.Stderr, "kv-gen: "+format+"\n", a...)
	os.Exit(2)
}

func emit(o interface{}) {
	b, err := json.Marshal(o)
	if err != nil {
		fail("cannot encode: %v", err)
	}
	fmt.Printf("%s\n", b)
}

// toURL points a webhook at addr instead of at virt-api's Service.
func toURL(addr string, cc *admissionregistrationv1.WebhookClientConfig, ca []byte) {
	path := ""
	if cc.Service != nil && cc.Service.Path != nil {
		path = *cc.Service.Path
	}
	u := "https://" + addr + path
	cc.Service = nil
	cc.URL = &u
	cc.CABundle = ca
}

func main() {
	what := flag.String("what", "", "crds | rbac | webhooks")
	ns := flag.String("namespace", "kubevirt", "KubeVirt install namespace")
	addr := flag.String("webhook-addr", "", "host:port virt-api serves on (webhooks)")
	caFile := flag.String("ca", "", "PEM CA that signed virt-api's serving certificate (webhooks)")
	flag.Parse()

	switch *what {
	case "crds":
		for _, f := range crdFuncs {
			crd, err := f()
			if err != nil {
				fail("generating a CRD: %v", err)
			}
			crd.APIVersion = "apiextensions.k8s.io/v1"
			crd.Kind = "CustomResourceDefinition"
			emit(crd)
		}
	case "rbac":
		var objs []runtime.Object
		objs = append(objs, rbac.GetAllCluster()...)
		objs = append(objs, rbac.GetAllApiServer(*ns)...)
		objs = append(objs, rbac.GetAllController(*ns)...)
		for _, o := range objs {
			emit(o)
		}
	case "webhooks":
		if *addr == "" || *caFile == "" {
			fail("-what webhooks needs -webhook-addr and -ca")
		}
		ca, err := os.ReadFile(*caFile)
		if err != nil {
			fail("cannot read the CA: %v", err)
		}
		m := components.NewVirtAPIMutatingWebhookConfiguration(*ns)
		for i := range m.Webhooks {
			toURL(*addr, &m.Webhooks[i].ClientConfig, ca)
		}
		v := components.NewVirtAPIValidatingWebhookConfiguration(*ns)
		for i := range v.Webhooks {
			toURL(*addr, &v.Webhooks[i].ClientConfig, ca)
		}
		m.APIVersion, m.Kind = "admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration"
		v.APIVersion, v.Kind = "admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration"
		emit(m)
		emit(v)
	default:
		fail("-what must be crds, rbac or webhooks")
	}
}
