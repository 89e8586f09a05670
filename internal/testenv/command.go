package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// BuildCommand builds ./cmd/xenorchestra-cloud-controller-manager into dir and returns the
// binary's path, for the tests that run the real process. It builds as make build does (no cgo,
// -trimpath) whatever the test's own flags, so that it reuses the packages make test compiled:
// under make test-race, a plain go build would compile every dependency a third time (minutes
// cold).
func BuildCommand(dir string) (string, error) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("go tool not found: %w", err)
	}
	out := filepath.Join(dir, "xenorchestra-cloud-controller-manager")
	cmd := exec.Command(goTool, "build", "-trimpath", "-o", out, "./cmd/xenorchestra-cloud-controller-manager")
	cmd.Dir, cmd.Env = RepoRoot(), append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %w\n%s", err, b)
	}
	return out, nil
}

// CommandEnv is the test's environment without what would change the controller's
// configuration behind the test's back (XOA_*, a kubeconfig, an in-cluster API server).
func CommandEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "XOA_") || k == "KUBECONFIG" || k == "KUBERNETES_SERVICE_HOST" || k == "KUBERNETES_SERVICE_PORT" {
			continue
		}
		env = append(env, kv)
	}
	return env
}
