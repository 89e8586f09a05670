package charts

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// recipeValues are the values Xen Orchestra's Kubernetes recipe gives the upstream chart
// (xo-server's createCluster, written to xo-ccm-values.yml) for a cluster of three control
// planes: all controllers, the XO server and the token it made, a DaemonSet.
func recipeValues(url, token string) map[string]any {
	return map[string]any{
		"enabledControllers": []string{"*"},
		"config":             map[string]any{"url": url, "insecure": false, "token": token},
		"useDaemonSet":       true,
	}
}

// TestMicroK8sRecipeSwitch runs the MicroK8s commands of docs/install.md ("MicroK8s, as Xen
// Orchestra's Kubernetes recipe deploys it") as written, on what the recipe installs: the
// upstream chart (its stand-in) as the release xenorchestra-cloud-controller-manager in
// kube-system, with the recipe's values, its DaemonSet included. microk8s helm and microk8s
// kubectl are helm and kubectl, and the chart of this checkout stands for the registry's (the
// same chart: the real-node tier installs it from a registry). The release must be this chart,
// nothing of upstream's left (no DaemonSet), the recipe's values applied, the Secret kept for
// the CSI driver, and the controller, run as the Deployment says, must serve and initialize
// Nodes.
func TestMicroK8sRecipeSwitch(t *testing.T) {
	env := startInstallEnv(t)
	ctx := t.Context()
	x, vms := newInstallXO(t)
	kubeconfig := writeAdminKubeconfig(t, env)
	dir := t.TempDir()

	// The recipe's install, its OCI reference replaced by the stand-in.
	values := filepath.Join(t.TempDir(), "xo-ccm-values.yml")
	if err := os.WriteFile(values, []byte(toYAML(t, recipeValues(x.URL, x.Token))), 0o600); err != nil {
		t.Fatal(err)
	}
	runDocCommands(t, dir, kubeconfig, fmt.Sprintf("helm install --namespace=kube-system -f %s %s %s", values, chartName, upstreamChart))
	var ds appsv1.DaemonSet
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: installNamespace, Name: chartName}, &ds); err != nil {
		t.Fatalf("the recipe's DaemonSet: %v", err)
	}

	// The commands of docs/install.md, with the registry's chart at the chart's version
	// replaced by this checkout's.
	block := docBlock(t, "install.md", "ns=kube-system release=xenorchestra-cloud-controller-manager   # the recipe's release")
	oci := regexp.MustCompile(`oci://ghcr\.io/xenorchestra-k8s/charts/` + chartName + ` --version (\S+)`)
	refs := oci.FindAllStringSubmatch(block, -1)
	if len(refs) != 2 {
		t.Fatalf("the MicroK8s commands name the chart in the registry %d times, want 2 (the check and the upgrade):\n%s", len(refs), block)
	}
	for _, r := range refs {
		if r[1] != chartVersion(t) {
			t.Errorf("the MicroK8s commands install the chart %s, Chart.yaml's version is %s", r[1], chartVersion(t))
		}
	}
	block = oci.ReplaceAllString(block, "./charts/"+chartName)
	if err := os.Symlink(filepath.Join(repoRoot, "charts"), filepath.Join(dir, "charts")); err != nil {
		t.Fatal(err)
	}
	// microk8s helm and microk8s kubectl: the recipe's own helm and kubectl.
	runDocCommands(t, dir, kubeconfig, "microk8s() { \"$@\"; }\n"+block)

	status := runDocCommands(t, dir, kubeconfig, "helm -n kube-system status "+chartName+" -o json")
	if !strings.Contains(status, `"status":"deployed"`) || !strings.Contains(status, `"version":2`) {
		t.Errorf("helm status after the switch: %.400s", status)
	}
	checkNothingOfUpstream(t, env)
	d := getDeployment(t, env, chartName)
	if got := mustFlag(t, d.Spec.Template.Spec.Containers[0].Args, "controllers"); got != "*" {
		t.Errorf("--controllers=%s, want the recipe's enabledControllers *", got)
	}
	if s := configVolumeSecret(t, d); s != chartName+"-config" {
		t.Errorf("the Deployment reads its config from Secret %q, want the chart's %s-config", s, chartName)
	}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: installNamespace, Name: chartName}, &ds); err == nil {
		t.Errorf("the recipe's DaemonSet %s is left", ds.Name)
	}
	if _, err := os.Stat(filepath.Join(dir, "config.yaml")); err == nil {
		t.Error("the copy of config.yaml is left on disk")
	}
	p := runAsDeployment(t, env, d)
	p.checkServes(t, env, x, vms)
}
