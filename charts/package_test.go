package charts

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
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

// TestKubeVersionIsTheTestedWindow checks that the chart's kubeVersion is the window CI tests:
// from the oldest minor make test-oldest runs (the Makefile's K8S_OLDEST) to the newest, the
// default of hack/testbin.sh, which builds the minors of K8S_MINORS; and that the README and
// docs/install.md state the same window.
func TestKubeVersionIsTheTestedWindow(t *testing.T) {
	read := func(path string) string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(repoRoot, path))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	find := func(path, pattern string) string {
		t.Helper()
		m := regexp.MustCompile(pattern).FindStringSubmatch(read(path))
		if m == nil {
			t.Fatalf("%s has no line matching %s", path, pattern)
		}
		return m[1]
	}
	minors := strings.Fields(find("hack/testbin.sh", `(?m)^K8S_MINORS="([^"]+)"$`))
	newest := find("hack/testbin.sh", `(?m)^K8S_VERSION=\$\{K8S_VERSION:-([0-9.]+)\}$`)
	oldest := find("Makefile", `(?m)^K8S_OLDEST\s+\?= ([0-9.]+)$`)
	minor := func(v string) int {
		t.Helper()
		parts := strings.Split(v, ".")
		if len(parts) < 2 {
			t.Fatalf("version %q", v)
		}
		n, err := strconv.Atoi(parts[1])
		if err != nil {
			t.Fatalf("version %q: %v", v, err)
		}
		return n
	}
	first, last := minors[0], minors[len(minors)-1]
	if minor(oldest) != minor(first) || minor(newest) != minor(last) || len(minors) != minor(last)-minor(first)+1 {
		t.Errorf("hack/testbin.sh supports %v and builds %s by default, the Makefile's oldest is %s: want the window's ends", minors, newest, oldest)
	}
	want := fmt.Sprintf(">=1.%d.0-0 <1.%d.0-0", minor(first), minor(last)+1)
	var meta struct{ KubeVersion string }
	if err := yaml.Unmarshal([]byte(read("charts/"+chartName+"/Chart.yaml")), &meta); err != nil {
		t.Fatal(err)
	}
	if meta.KubeVersion != want {
		t.Errorf("Chart.yaml kubeVersion %q, want the tested window %q", meta.KubeVersion, want)
	}
	for path, s := range map[string]string{
		"README.md":       fmt.Sprintf("Kubernetes **%s to %s**", first, last),
		"docs/install.md": fmt.Sprintf("| Kubernetes %s to %s |", first, last),
	} {
		if !strings.Contains(read(path), s) {
			t.Errorf("%s does not state the window: no %q", path, s)
		}
	}
}
