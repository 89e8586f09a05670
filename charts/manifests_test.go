package charts

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/config"
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

// TestManifestsConfigLoads checks that the plain manifests' placeholder configuration is the
// file format the binary reads, so that editing url and token is all a user has to do.
func TestManifestsConfigLoads(t *testing.T) {
	b, err := os.ReadFile(manifestsFile)
	if err != nil {
		t.Fatal(err)
	}
	o, err := parseManifests(b)
	if err != nil {
		t.Fatal(err)
	}
	s := decode[corev1.Secret](t, o, "Secret", configSecret)
	_, c := deployment(t, o)
	p := mustFlag(t, c.Args, "config")
	if filepath.Base(p) != "config.yaml" || s.StringData["config.yaml"] == "" {
		t.Fatalf("--config=%s, Secret keys %v", p, s.StringData)
	}
	file := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(file, []byte(s.StringData["config.yaml"]), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(file, func(string) string { return "" })
	if err != nil {
		t.Fatalf("placeholder config does not load: %v", err)
	}
	if cl := cfg.Clusters[0]; cl.URL != "https://xoa.example.com" || cl.Token.Reveal() == "" {
		t.Errorf("placeholder config: url %q, token set %v", cl.URL, cl.Token.Reveal() != "")
	}
	for _, kind := range []string{"Deployment", "MutatingWebhookConfiguration", "Certificate", "ClusterRole", "Role", "PodDisruptionBudget"} {
		if len(o.ofKind(kind)) == 0 {
			t.Errorf("no %s in the plain manifests", kind)
		}
	}
}
