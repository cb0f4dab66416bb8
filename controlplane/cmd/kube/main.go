// Command kube is kube-apiserver, kube-controller-manager and kube-scheduler in one
// binary, chosen by the name it is started as (its hard links in the same folder), so
// the three share one link instead of three (the largest step of a warm build, and a
// good part of a cold one).
//
// Each command is the upstream one, unchanged: NewAPIServerCommand
// (k8s.io/kubernetes cmd/kube-apiserver/app), NewControllerManagerCommand
// (cmd/kube-controller-manager/app) and NewSchedulerCommand (cmd/kube-scheduler/app).
package main

import (
	"fmt"
	"os"
	"path/filepath"
	_ "time/tzdata" // CronJob time zones, and the API server's

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
)

func main() {
	name := filepath.Base(os.Args[0])
	switch name {
	case "kube-apiserver":
		os.Exit(cli.Run(apiserver.NewAPIServerCommand()))
	case "kube-controller-manager":
		os.Exit(cli.Run(controllermanager.NewControllerManagerCommand()))
	case "kube-scheduler":
		os.Exit(cli.Run(scheduler.NewSchedulerCommand()))
	default:
		fmt.Fprintf(os.Stderr, "%s: start this binary as kube-apiserver, kube-controller-manager or kube-scheduler (a link of that name)\n", name)
		os.Exit(2)
	}
}
