package charts

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// manifestsFile is the checked-in plain manifests for kubectl apply.
var manifestsFile = filepath.Join(repoRoot, "docs", "deploy", "cloud-controller-manager.yml")

// TestManifestsUpToDate re-renders docs/deploy/cloud-controller-manager.yml with
// hack/render-manifests.sh and fails when the checked-in file differs: run `make manifests`.
func TestManifestsUpToDate(t *testing.T) {
	out := filepath.Join(t.TempDir(), "cloud-controller-manager.yml")
	cmd := exec.Command("bash", filepath.Join(repoRoot, "hack", "render-manifests.sh"), out)
	cmd.Env = append(os.Environ(), "HELM="+helmBin(t), "KUBECONFIG="+filepath.Join(t.TempDir(), "none"))
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("hack/render-manifests.sh: %v\n%s", err, b)
	}
	want, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(manifestsFile)
	if err != nil {
		t.Fatalf("%v: run `make manifests`", err)
	}
	if !bytes.Equal(got, want) {
		gl, wl := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
		for i := 0; i < max(len(gl), len(wl)); i++ {
			var g, w string
			if i < len(gl) {
				g = gl[i]
			}
			if i < len(wl) {
				w = wl[i]
			}
			if g != w {
				t.Fatalf("docs/deploy/cloud-controller-manager.yml is stale (run `make manifests`); first difference at line %d:\n have: %q\n want: %q", i+1, g, w)
			}
		}
	}
}

// TestManifestsReadUpstreamSecret checks what the plain manifests need from the cluster: the
// XO configuration from the Secret kube-system/xenorchestra-cloud-controller-manager, key
// config.yaml, the one the upstream controller's install guide creates (charts/install_test.go
// runs the two commands), which the file does not hold, so that kubectl apply never writes a
// placeholder over it; and no cert-manager (selfManaged certificates).
func TestManifestsReadUpstreamSecret(t *testing.T) {
	b, err := os.ReadFile(manifestsFile)
	if err != nil {
		t.Fatal(err)
	}
	o, err := parseManifests(b)
	if err != nil {
		t.Fatal(err)
	}
	if s := o.ofKind("Secret"); len(s) != 0 {
		t.Errorf("the plain manifests hold Secrets %v: kubectl apply would write them over the user's", s.kinds())
	}
	for _, m := range o {
		if strings.HasSuffix(m.obj.GetAPIVersion(), "cert-manager.io/v1") {
			t.Errorf("%s %s needs cert-manager", m.obj.GetKind(), m.obj.GetName())
		}
	}
	d, c := deployment(t, o)
	if d.Namespace != "kube-system" {
		t.Errorf("Deployment in namespace %q, want kube-system", d.Namespace)
	}
	if got := configSecretOf(t, o); got != chartName {
		t.Errorf("config from Secret %q, want %s (upstream's)", got, chartName)
	}
	if got := filepath.Base(mustFlag(t, c.Args, "config")); got != "config.yaml" {
		t.Errorf("--config names %s, want the key config.yaml", got)
	}
	if got := mustFlag(t, c.Args, "webhook-certs"); got != "self-managed" {
		t.Errorf("--webhook-certs=%s, want self-managed", got)
	}
	for _, kind := range []string{"Deployment", "MutatingWebhookConfiguration", "ClusterRole", "Role", "PodDisruptionBudget"} {
		if len(o.ofKind(kind)) == 0 {
			t.Errorf("no %s in the plain manifests", kind)
		}
	}
	header := strings.SplitN(string(b), "\n---", 2)[0]
	for _, cmd := range []string{
		"kubectl -n kube-system create secret generic xenorchestra-cloud-controller-manager --from-file=config.yaml",
		"kubectl apply -f cloud-controller-manager.yml",
	} {
		if !strings.Contains(header, cmd) {
			t.Errorf("the manifests' header lacks %q", cmd)
		}
	}
}
