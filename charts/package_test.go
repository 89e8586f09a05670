package charts

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// chartVersion returns the chart's version from Chart.yaml.
func chartVersion(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(chartDir, "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var c struct{ Version string }
	if err := yaml.Unmarshal(b, &c); err != nil || c.Version == "" {
		t.Fatalf("Chart.yaml version: %q, %v", c.Version, err)
	}
	return c.Version
}

// TestChartPackage runs `make chart-package` and checks that the archive is the chart: it lints,
// renders, and carries its values schema.
func TestChartPackage(t *testing.T) {
	dist := t.TempDir()
	cmd := exec.Command("make", "-s", "-C", repoRoot, "chart-package", "HELM="+helmBin(t), "DIST="+dist)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make chart-package: %v\n%s", err, out)
	}
	tgz := filepath.Join(dist, chartName+"-"+chartVersion(t)+".tgz")
	if _, err := os.Stat(tgz); err != nil {
		t.Fatalf("no archive: %v", err)
	}
	if out, err := runHelm(t, "lint", "--strict", tgz); err != nil {
		t.Fatalf("helm lint of the archive: %v\n%s", err, out)
	}
	o := renderArgs(t, "template", release, tgz, "--namespace", namespace, "--set", baselineXO)
	checkInvariants(t, o)
	// The schema travels with the archive: it still refuses an unknown value.
	if _, err := runHelm(t, "template", release, tgz, "--set", "replicas=3"); err == nil || !strings.Contains(err.Error(), "replicas") {
		t.Errorf("the archive accepts an unknown value: %v", err)
	}
}

// TestUmbrellaChart renders the chart as a subchart, the way an umbrella chart uses it: Helm
// then passes global values down, which the schema must accept.
func TestUmbrellaChart(t *testing.T) {
	umbrella := t.TempDir()
	if err := os.CopyFS(filepath.Join(umbrella, "charts", chartName), os.DirFS(chartDir)); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"Chart.yaml":  "apiVersion: v2\nname: platform\nversion: 1.0.0\n",
		"values.yaml": "global:\n  imageRegistry: registry.example.com\n" + chartName + ":\n  existingConfigSecret: xo-config\n",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(umbrella, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	out, err := runHelm(t, "template", release, umbrella, "--namespace", namespace)
	if err != nil {
		t.Fatal(err)
	}
	o, err := parseManifests([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	if got := configSecretOf(t, o); got != "xo-config" {
		t.Errorf("subchart values not applied: config from %q", got)
	}
}
