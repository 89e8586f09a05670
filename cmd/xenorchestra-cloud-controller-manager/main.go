// Command xenorchestra-cloud-controller-manager runs the Node admission webhook and the node
// controllers for Kubernetes clusters whose nodes are Xen Orchestra VMs.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"syscall"

	"golang.org/x/term"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/cmd/app"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/cmd/app/diagnose"
)

// gcPercent is the GOGC the process runs with unless the GOGC environment variable sets one:
// the heap may grow to 1.5 times the live data between collections instead of Go's default
// 2 times. The live data is mostly the Node cache and the XO inventory, which change slowly, so
// the extra collections cost little CPU: measured with 5,000 Nodes and 10,000 VMs, about a third
// less resident memory, and a 5,000-Node burst within its run-to-run spread (BENCHMARKS.md,
// "Memory: where the 5,000-Node resident set goes").
const gcPercent = 50

func main() {
	// check and explain (also as the kubectl plugin kubectl-xenorchestra); the controller's own
	// invocation takes flags only.
	if args, ok := diagnose.Args(os.Args); ok {
		ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := diagnose.Main(ctx, args, os.Stdin, os.Stdout, os.Stderr, term.IsTerminal(int(os.Stdout.Fd())), os.Getenv)
		cancel()
		os.Exit(code)
	}
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercent)
	}
	o := app.NewOptions()
	o.AddFlags(flag.CommandLine)
	showVersion := flag.Bool("version", false, "Print the version and exit.")
	if err := app.Parse(flag.CommandLine, os.Args[1:]); err != nil {
		exit(err)
	}
	if *showVersion {
		fmt.Println(app.Version())
		return
	}
	if !o.Profiling {
		// Heap profiling samples an allocation every 512 KiB and keeps a record of each sampled
		// call stack for the life of the process (about 1 MiB with 5,000 Nodes); only the
		// profiles --profiling serves read them.
		runtime.MemProfileRate = 0
	}
	// What can be checked without a cluster comes first, flags then the XO config, so that a
	// mistake there is reported plainly before any attempt to find a kubeconfig.
	if o.CheckConfig {
		if err := o.Check(os.Getenv, os.Stdout); err != nil {
			exit(err)
		}
		return
	}
	o.OutOfCluster = !app.InCluster()
	if err := o.Validate(); err != nil {
		exit(err)
	}
	cfg, err := o.LoadConfig(os.Getenv)
	if err != nil {
		exit(err)
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&o.Zap)))
	restConfig, err := ctrl.GetConfig()
	if err != nil {
		exit(fmt.Errorf("kubeconfig: %w", err))
	}
	// The first SIGTERM or SIGINT ends the context: RunConfig stops being Ready and serves on
	// for --shutdown-delay before it stops. A second one exits at once.
	if err := app.RunConfig(ctrl.SetupSignalHandler(), o, cfg, restConfig); err != nil {
		exit(err)
	}
}

// exit prints err and exits with status 1.
func exit(err error) {
	fmt.Fprintln(os.Stderr, "error:", err)
	os.Exit(1)
}
