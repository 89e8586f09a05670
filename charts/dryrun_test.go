package charts

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/internal/testenv"
)

// prometheusOperator is the module whose CRDs give the ServiceMonitor schema. It is not a
// dependency of the project: the test downloads it into the module cache.
const prometheusOperator = "github.com/prometheus-operator/prometheus-operator@v0.85.0"

// goModuleDir returns the folder of a module in the module cache; with a version it downloads
// the module (outside the main module, which must not depend on it).
func goModuleDir(t *testing.T, module string) string {
	t.Helper()
	var cmd *exec.Cmd
	if strings.Contains(module, "@") {
		cmd = exec.Command("go", "mod", "download", "-json", module)
		cmd.Dir = t.TempDir()
		cmd.Env = append(os.Environ(), "GOFLAGS=", "GO111MODULE=on")
	} else {
		cmd = exec.Command("go", "list", "-m", "-json", module)
		cmd.Dir = repoRoot
	}
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, stderr)
	}
	var m struct{ Dir string }
	if err := json.Unmarshal(out, &m); err != nil || m.Dir == "" {
		t.Fatalf("%s: no module folder in %s (%v)", strings.Join(cmd.Args, " "), out, err)
	}
	return m.Dir
}

// TestServerDryRun sends every object of every value combination to a real API server with
// cert-manager's CRDs (from the cert-manager module the tests already parse with) and the
// ServiceMonitor and PrometheusRule CRDs installed, as a server-side dry run with strict field
// validation: the API server's defaulting, validation and the CRDs' schemas judge the rendered
// chart.
func TestServerDryRun(t *testing.T) {
	crds := []string{
		filepath.Join(goModuleDir(t, "github.com/cert-manager/cert-manager"), "deploy", "crds"),
		filepath.Join(goModuleDir(t, prometheusOperator), "example", "prometheus-operator-crd", "monitoring.coreos.com_servicemonitors.yaml"),
		filepath.Join(goModuleDir(t, prometheusOperator), "example", "prometheus-operator-crd", "monitoring.coreos.com_prometheusrules.yaml"),
	}
	env, err := testenv.Start(testenv.Options{CRDPaths: crds})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stop envtest: %v", err)
		}
	})
	c := client.WithFieldValidation(env.Client, client.FieldValidation(metav1.FieldValidationStrict))
	ctx := context.Background()

	for name, rc := range renderCases {
		t.Run(name, func(t *testing.T) {
			ns := "dry-run-" + strings.ToLower(name)
			if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
				t.Fatalf("create namespace: %v", err)
			}
			out, err := runHelm(t, templateArgs(ns, rc.values, rc.set...)...)
			if err != nil {
				t.Fatal(err)
			}
			objs, err := parseManifests([]byte(out))
			if err != nil {
				t.Fatal(err)
			}
			if len(objs) < 5 {
				t.Fatalf("only %d objects rendered", len(objs))
			}
			for _, m := range objs {
				obj := m.obj.DeepCopy()
				if err := c.Create(ctx, obj, client.DryRunAll); err != nil {
					t.Errorf("%s %s: %v", obj.GetKind(), obj.GetName(), err)
				}
			}
		})
	}

	// NOTES.txt needs a cluster to render (helm install --dry-run): use this one.
	t.Run("notes", func(t *testing.T) {
		user, err := env.AddUser(envtest.User{Name: "helm", Groups: []string{"system:masters"}}, env.Config)
		if err != nil {
			t.Fatal(err)
		}
		kubeconfig, err := user.KubeConfig()
		if err != nil {
			t.Fatal(err)
		}
		kcPath := filepath.Join(t.TempDir(), "kubeconfig")
		if err := os.WriteFile(kcPath, kubeconfig, 0o600); err != nil {
			t.Fatal(err)
		}
		notes := func(t *testing.T, set ...string) string {
			args := []string{"install", release, chartDir, "--namespace", "kube-system", "--dry-run=client", "--kubeconfig", kcPath}
			if !namesXO("", set) {
				set = append(set, baselineXO)
			}
			for _, s := range set {
				args = append(args, "--set", s)
			}
			out, err := runHelm(t, args...)
			if err != nil {
				t.Fatal(err)
			}
			_, n, ok := strings.Cut(out, "NOTES:")
			if !ok {
				t.Fatalf("no NOTES in:\n%.300s", out)
			}
			return n
		}
		verify := "kubectl get node -L topology.kubernetes.io/region,topology.kubernetes.io/zone,node.kubernetes.io/instance-type"
		cases := map[string]struct {
			set          []string
			want, absent []string
		}{
			"defaults":        {want: []string{verify, "cert-manager"}, absent: []string{"single replica"}},
			"single replica":  {set: []string{"replicaCount=1", "existingConfigSecret=x"}, want: []string{"single replica", verify}},
			"without webhook": {set: []string{"webhook.enabled=false", "config.url=https://xo", "config.token=t"}, want: []string{verify}, absent: []string{"cert-manager"}},
		}
		for name, c := range cases {
			t.Run(name, func(t *testing.T) {
				n := notes(t, c.set...)
				for _, w := range c.want {
					if !strings.Contains(n, w) {
						t.Errorf("NOTES lack %q:\n%s", w, n)
					}
				}
				for _, a := range c.absent {
					if strings.Contains(n, a) {
						t.Errorf("NOTES mention %q:\n%s", a, n)
					}
				}
			})
		}
	})
}

// TestDryRunCoversCIValues keeps the dry run and the rendering cases on the same ci files.
func TestDryRunCoversCIValues(t *testing.T) {
	var files []string
	for _, c := range renderCases {
		if c.values != "" {
			files = append(files, c.values)
		}
	}
	for _, f := range ciValuesFiles(t) {
		if !slices.Contains(files, f) {
			t.Errorf("%s is not dry-run", f)
		}
	}
}
