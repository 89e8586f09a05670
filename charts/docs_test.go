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

// TestREADMEInstall renders the README's helm install command and loads the config it gives,
// with the token file as kubectl create secret --from-file makes it from xo-cli's output: with a
// trailing newline.
func TestREADMEInstall(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var args []string
	for _, line := range strings.Split(string(b), "\n") {
		if w := shellWords(line); len(w) > 3 && w[0] == "helm" && w[1] == "install" && w[3] == "./charts/"+chartName {
			args = append([]string{"template", w[2], chartDir}, w[4:]...)
		}
	}
	if args == nil {
		t.Fatal("no helm install of ./charts/" + chartName + " in README.md")
	}
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
