// Command xenorchestra-cloud-controller-manager runs the Node admission webhook and the node
// controllers for Kubernetes clusters whose nodes are Xen Orchestra VMs.
package main

import (
	"flag"
	"fmt"
	"os"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/cmd/app"
)

func main() {
	o := app.NewOptions()
	o.AddFlags(flag.CommandLine)
	showVersion := flag.Bool("version", false, "Print the version and exit.")
	flag.Parse()
	if *showVersion {
		fmt.Println(app.Version())
		return
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&o.Zap)))
	restConfig, err := ctrl.GetConfig()
	if err == nil {
		err = app.Run(ctrl.SetupSignalHandler(), o, restConfig, os.Getenv)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}
