package charts

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/config"
)

// tokenOnCommandLine matches a shell line that puts the XO token in a process's arguments, where
// ps shows it: a helm --set of a token key, or a token variable expanded into a command.
var tokenOnCommandLine = regexp.MustCompile(`--set(-string|-file|-json|-literal)?[= ]['"]?[^ ]*[.\]]token=|\$\{?[A-Za-z_]*(TOKEN|[Tt]oken)\b`)

// TestDocsKeepTokenOffCommandLines checks that no command of README.md or docs/*.md puts the
// XO token on a command line.
func TestDocsKeepTokenOffCommandLines(t *testing.T) {
	docs, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range append(docs, filepath.Join(repoRoot, "README.md")) {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			if tokenOnCommandLine.MatchString(line) {
				t.Errorf("%s:%d puts the XO token on a command line (ps shows it): %s", filepath.Base(doc), i+1, line)
			}
		}
	}
}

// shellWords splits a command line into words, honouring single and double quotes (no escapes,
// no expansions: what the docs' commands use).
func shellWords(line string) []string {
	var (
		words []string
		word  strings.Builder
		quote rune
		in    bool
	)
	for _, r := range line {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			word.WriteRune(r)
		case r == '\'' || r == '"':
			quote, in = r, true
		case r == ' ' || r == '\t':
			if in {
				words = append(words, word.String())
				word.Reset()
			}
			in = false
		default:
			word.WriteRune(r)
			in = true
		}
	}
	if in {
		words = append(words, word.String())
	}
	return words
}

// TestREADMEInstall renders the README's two helm upgrade -i commands, the chart from the OCI
// registry at Chart.yaml's version (this checkout's chart stands for it) and from the checkout,
// which must be the same command otherwise, and loads the config they give, with the token file
// as kubectl create secret --from-file makes it from xo-cli's output: with a trailing newline.
func TestREADMEInstall(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	const registry = "oci://ghcr.io/xenorchestra-k8s/charts/" + chartName
	var fromRegistry, fromCheckout []string
	for _, line := range strings.Split(string(b), "\n") {
		w := shellWords(line)
		if len(w) < 5 || w[0] != "helm" || w[1] != "upgrade" || w[2] != "-i" {
			continue
		}
		switch {
		case w[4] == registry && len(w) > 6 && w[5] == "--version":
			if w[6] != chartVersion(t) {
				t.Errorf("README.md installs the chart %s from the registry, Chart.yaml's version is %s", w[6], chartVersion(t))
			}
			fromRegistry = append([]string{w[3]}, w[7:]...)
		case w[4] == "./charts/"+chartName:
			fromCheckout = append([]string{w[3]}, w[5:]...)
		}
	}
	if fromRegistry == nil || fromCheckout == nil {
		t.Fatalf("README.md lacks a helm upgrade -i of %s --version or of ./charts/%s", registry, chartName)
	}
	if strings.Join(fromRegistry, " ") != strings.Join(fromCheckout, " ") {
		t.Errorf("README.md's two installs differ but for the chart:\n%q\n%q", fromRegistry, fromCheckout)
	}
	args := append([]string{"template", fromCheckout[0], chartDir}, fromCheckout[1:]...)
	// In the tests' namespace, which checkInvariants expects; the last --namespace wins.
	o := renderArgs(t, append(args, "--namespace", namespace)...)
	checkInvariants(t, o)
	s := decode[corev1.Secret](t, o, "Secret", configSecretOf(t, o))
	// Where the chart mounts the tokenSecretRef Secrets, a folder here.
	const tokensDir = "/etc/xenorchestra-cloud-controller-manager/xo-tokens/"
	dir := t.TempDir()
	cfgText := strings.ReplaceAll(s.StringData["config.yaml"], tokensDir, dir+"/")
	if !strings.Contains(cfgText, dir) {
		t.Fatalf("the README's config takes no token from a mounted Secret:\n%s", s.StringData["config.yaml"])
	}
	const token = "0123456789abcdef"
	for _, m := range regexp.MustCompile(`tokenFile: (\S+)`).FindAllStringSubmatch(cfgText, -1) {
		if err := os.MkdirAll(filepath.Dir(m[1]), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(m[1], []byte(token+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	file := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(file, []byte(cfgText), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(file, func(string) string { return "" })
	if err != nil {
		t.Fatalf("the binary would reject the README's config: %v", err)
	}
	if cl := cfg.Clusters[0]; cl.URL != "https://xoa.example.com" || cl.Token.Reveal() != token {
		t.Errorf("README's config: url %q, token as written %v", cl.URL, cl.Token.Reveal() == token)
	}
}
