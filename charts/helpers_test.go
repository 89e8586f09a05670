package charts

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/cmd/app"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/internal/testenv"
)

const (
	chartName = "xenorchestra-cloud-controller-manager"
	// release and namespace are what the rendering tests install as; with the release named
	// after the chart, every resource is named chartName plus a suffix.
	release   = chartName
	namespace = "xo-system"
)

// repoRoot is the repository's root folder.
var repoRoot = testenv.RepoRoot()

// chartDir is the chart's folder.
var chartDir = filepath.Join(repoRoot, "charts", chartName)

var (
	helmOnce sync.Once
	helmPath string
	helmErr  error
)

// helmBin returns the pinned helm of hack/testbin.sh, which sits beside kube-apiserver.
func helmBin(t testing.TB) string {
	t.Helper()
	helmOnce.Do(func() {
		dir, err := testenv.AssetsDir()
		if err != nil {
			helmErr = err
			return
		}
		helmPath = filepath.Join(dir, "helm")
		if _, err := os.Stat(helmPath); err != nil {
			helmErr = fmt.Errorf("helm missing in %s: run `make testbin` (or hack/testbin.sh) first: %w", dir, err)
		}
	})
	if helmErr != nil {
		t.Fatal(helmErr)
	}
	return helmPath
}

// runHelm runs helm with args and returns its stdout, or an error holding its stderr.
func runHelm(t testing.TB, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(helmBin(t), args...)
	// No kubeconfig of the machine may leak into a render.
	cmd.Env = append(os.Environ(), "KUBECONFIG="+filepath.Join(t.TempDir(), "none"), "HELM_CACHE_HOME="+t.TempDir(),
		"HELM_CONFIG_HOME="+t.TempDir(), "HELM_DATA_HOME="+t.TempDir())
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("helm %s: %w\n%s%s", strings.Join(args, " "), err, stderr.String(), stdout.String())
	}
	return stdout.String(), nil
}

// templateArgs returns the helm template arguments for a values file (relative to the chart,
// "" for none) and --set flags, with baselineXO when they name no XO server.
func templateArgs(ns, valuesFile string, set ...string) []string {
	args := rawTemplateArgs(ns, valuesFile, set...)
	if !namesXO(valuesFile, set) {
		args = append(args, "--set", baselineXO)
	}
	return args
}

// rawTemplateArgs is templateArgs without the baseline.
func rawTemplateArgs(ns, valuesFile string, set ...string) []string {
	args := []string{"template", release, chartDir, "--namespace", ns}
	if valuesFile != "" {
		args = append(args, "-f", filepath.Join(chartDir, valuesFile))
	}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	return args
}

// baselineXO is the XO server of a render whose values name none: the chart refuses to render
// without one (TestChartRendersOnlyWhatTheBinaryAccepts), and most renders test something else.
const baselineXO = "existingConfigSecret=xo-config"

// namesXO reports whether a values file or --set flags name an XO server: config's url or
// clusters, existingConfigSecret, or XOA_URL in the environment.
func namesXO(valuesFile string, set []string) bool {
	for _, s := range set {
		if strings.HasPrefix(s, "config.url=") || strings.HasPrefix(s, "config.clusters") ||
			strings.HasPrefix(s, "existingConfigSecret=") || strings.Contains(s, "XOA_URL") {
			return true
		}
	}
	if valuesFile == "" {
		return false
	}
	b, err := os.ReadFile(filepath.Join(chartDir, valuesFile))
	if err != nil {
		return false // helm reports it
	}
	var v struct {
		ExistingConfigSecret string
		Config               struct {
			URL      string
			Clusters []any
		}
		ExtraEnv, ExtraEnvs []struct{ Name string }
	}
	_ = yaml.Unmarshal(b, &v)
	hasURL := func(env []struct{ Name string }) bool {
		return slices.ContainsFunc(env, func(e struct{ Name string }) bool { return e.Name == "XOA_URL" })
	}
	return v.ExistingConfigSecret != "" || v.Config.URL != "" || len(v.Config.Clusters) > 0 || hasURL(v.ExtraEnv) || hasURL(v.ExtraEnvs)
}

// manifest is one rendered object: its YAML document and the same parsed loosely.
type manifest struct {
	doc []byte
	obj *unstructured.Unstructured
}

// objects is a rendered chart.
type objects []manifest

// render runs helm template and parses the result; it fails the test on any error.
func render(t testing.TB, valuesFile string, set ...string) objects {
	t.Helper()
	return renderArgs(t, templateArgs(namespace, valuesFile, set...)...)
}

// renderArgs runs helm with these arguments (a template or install --dry-run) and parses the
// manifests it prints; it fails the test on any error.
func renderArgs(t testing.TB, args ...string) objects {
	t.Helper()
	out, err := runHelm(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := parseManifests([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// parseManifests splits a multi-document YAML stream into objects, skipping empty documents.
func parseManifests(data []byte) (objects, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var out objects
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read YAML document: %w", err)
		}
		var m map[string]any
		if err := yaml.Unmarshal(doc, &m); err != nil {
			return nil, fmt.Errorf("parse YAML document: %w\n%s", err, doc)
		}
		if len(m) == 0 {
			continue
		}
		obj := &unstructured.Unstructured{Object: m}
		if obj.GetKind() == "" || obj.GetAPIVersion() == "" || obj.GetName() == "" {
			return nil, fmt.Errorf("document without apiVersion, kind or name:\n%s", doc)
		}
		out = append(out, manifest{doc: doc, obj: obj})
	}
}

// kinds returns "Kind/name" of every object, sorted.
func (o objects) kinds() []string {
	var out []string
	for _, m := range o {
		out = append(out, m.obj.GetKind()+"/"+m.obj.GetName())
	}
	slices.Sort(out)
	return out
}

// ofKind returns the objects of a kind.
func (o objects) ofKind(kind string) objects {
	var out objects
	for _, m := range o {
		if m.obj.GetKind() == kind {
			out = append(out, m)
		}
	}
	return out
}

// find returns the object of a kind and name, or nil.
func (o objects) find(kind, name string) *manifest {
	for i := range o {
		if o[i].obj.GetKind() == kind && o[i].obj.GetName() == name {
			return &o[i]
		}
	}
	return nil
}

// decode parses the object of a kind and name into a typed value, rejecting unknown fields; it
// fails the test when the object is missing.
func decode[T any](t testing.TB, o objects, kind, name string) *T {
	t.Helper()
	m := o.find(kind, name)
	if m == nil {
		t.Fatalf("no %s %q rendered; have %v", kind, name, o.kinds())
	}
	return decodeManifest[T](t, *m)
}

// decodeManifest parses one manifest into a typed value, rejecting unknown fields.
func decodeManifest[T any](t testing.TB, m manifest) *T {
	t.Helper()
	out := new(T)
	if err := yaml.UnmarshalStrict(m.doc, out); err != nil {
		t.Fatalf("%s %s does not parse as %T: %v", m.obj.GetKind(), m.obj.GetName(), out, err)
	}
	return out
}

// deployment returns the rendered Deployment and its one container.
func deployment(t testing.TB, o objects) (*appsv1.Deployment, *corev1.Container) {
	t.Helper()
	d := decode[appsv1.Deployment](t, o, "Deployment", chartName)
	if n := len(d.Spec.Template.Spec.Containers); n != 1 {
		t.Fatalf("Deployment has %d containers, want 1", n)
	}
	return d, &d.Spec.Template.Spec.Containers[0]
}

// flagValue returns the value of --name in args and whether it is there. A flag given twice is
// a test failure: the binary would silently take the last one.
func flagValue(t testing.TB, args []string, name string) (string, bool) {
	t.Helper()
	var val string
	var n int
	for _, a := range args {
		k, v, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if k != name {
			continue
		}
		n++
		val = v
		if !hasValue {
			val = "true"
		}
	}
	if n > 1 {
		t.Fatalf("flag --%s given %d times in %q", name, n, args)
	}
	return val, n == 1
}

// mustFlag returns the value of --name, failing the test when it is absent.
func mustFlag(t testing.TB, args []string, name string) string {
	t.Helper()
	v, ok := flagValue(t, args, name)
	if !ok {
		t.Fatalf("flag --%s missing from %q", name, args)
	}
	return v
}

// containerPort returns the container port of a name.
func containerPort(t testing.TB, c *corev1.Container, name string) int32 {
	t.Helper()
	for _, p := range c.Ports {
		if p.Name == name {
			return p.ContainerPort
		}
	}
	t.Fatalf("container has no port %q: %+v", name, c.Ports)
	return 0
}

// portOf returns the port of an address such as ":8080".
func portOf(t testing.TB, addr string) int32 {
	t.Helper()
	i := strings.LastIndex(addr, ":")
	p, err := strconv.ParseInt(addr[i+1:], 10, 32)
	if i < 0 || err != nil {
		t.Fatalf("address %q has no port", addr)
	}
	return int32(p)
}

// binaryFlags parses args with the binary's own flag definitions and validation
// (cmd/app.Options), so the chart's command line is proven acceptable to the binary.
func binaryFlags(args []string) error {
	o := app.NewOptions()
	fs := flag.NewFlagSet(chartName, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o.AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return fmt.Errorf("stray positional args %q", fs.Args())
	}
	return o.Validate()
}
