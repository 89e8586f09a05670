package diagnose

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// TestArgs: the subcommands run as kubectl-xenorchestra (every argument is the plugin's) or
// with check or explain first; every other invocation is the controller's, flags only.
func TestArgs(t *testing.T) {
	for _, c := range []struct {
		argv []string
		want []string
		ok   bool
	}{
		{[]string{"/usr/local/bin/kubectl-xenorchestra", "check"}, []string{"check"}, true},
		{[]string{"kubectl-xenorchestra.exe", "explain", "node", "a"}, []string{"explain", "node", "a"}, true},
		{[]string{"kubectl-xenorchestra"}, []string{}, true},
		{[]string{"xenorchestra-cloud-controller-manager", "check", "--pre"}, []string{"check", "--pre"}, true},
		{[]string{"xenorchestra-cloud-controller-manager", "explain", "node", "a"}, []string{"explain", "node", "a"}, true},
		{[]string{"xenorchestra-cloud-controller-manager", "--config=/c", "--webhook=false"}, nil, false},
		{[]string{"xenorchestra-cloud-controller-manager"}, nil, false},
		{[]string{"xenorchestra-cloud-controller-manager", "--webhook", "check"}, nil, false},
	} {
		got, ok := Args(c.argv)
		if ok != c.ok || !slices.Equal(got, c.want) {
			t.Errorf("Args(%q) = %q, %v; want %q, %v", c.argv, got, ok, c.want, c.ok)
		}
	}
}

// TestUsageErrors: a usage error exits 2 and says what is wrong, before any request.
func TestUsageErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"explain", "foo"}, "usage: explain node NAME"},
		{[]string{"explain", "node"}, "usage: explain node NAME"},
		{[]string{"check", "extra"}, "check takes no argument"},
		{[]string{"check", "-o", "yaml"}, `--output: "yaml" is neither text nor json`},
		{[]string{"check", "--pre", "--webhook-certificates-mode=cert-manager"}, `--webhook-certificates-mode: "cert-manager" is none of`},
		// The controller's --webhook-certs takes other values (dir, self-managed): not check's flag.
		{[]string{"check", "--pre", "--webhook-certs=self-managed"}, "flag provided but not defined: -webhook-certs"},
		{[]string{"explain", "node", "a", "--pre"}, "--pre: check only"},
		{[]string{"check", "--no-such-flag"}, "flag provided but not defined"},
		{[]string{"status"}, "Usage:"},
		{nil, "Usage:"},
	} {
		var out, errOut bytes.Buffer
		code := Main(context.Background(), c.args, nil, &out, &errOut, false, func(string) string { return "" })
		if code != 2 || !strings.Contains(errOut.String(), c.want) || out.Len() != 0 {
			t.Errorf("%q: exit %d, stderr %q, stdout %q; want 2, %q, nothing", c.args, code, errOut.String(), out.String(), c.want)
		}
	}
}

// TestFlagsAnywhere: flags may follow the positional arguments, as with kubectl.
func TestFlagsAnywhere(t *testing.T) {
	o := NewOptions()
	fs := newFlagSet(o)
	pos, err := parseInterspersed(fs, []string{"node", "-o", "json", "worker-1", "--context=c", "--", "-x"})
	if err != nil || !slices.Equal(pos, []string{"node", "worker-1", "-x"}) || o.Output != "json" || o.Context != "c" {
		t.Errorf("got %q, %v, output %q, context %q", pos, err, o.Output, o.Context)
	}
}

// TestReportOutput: the text output marks each line, prints the fix under a failure or a
// warning, colours only when asked (a terminal), and never shows a secret the report knows;
// -o json carries the same, and the counts.
func TestReportOutput(t *testing.T) {
	const secret = "s3cretTokenValue0123456789abcdefXYZ"
	r := &Report{Command: "check"}
	r.hide(secret)
	r.ok(secAPI, "API server answers")
	r.fail(secXO, "xo: HTTP 401 for token "+secret, "create a token")
	r.warn(secXO, "no event stream", "upgrade XO")
	r.info(secNodes, "a fact")

	var plain, coloured, js bytes.Buffer
	if err := r.WriteText(&plain, false); err != nil {
		t.Fatal(err)
	}
	want := "Kubernetes API\n  ✔ API server answers\n\nXO servers\n  ✘ xo: HTTP 401 for token <redacted>\n      fix: create a token\n  ‼ no event stream\n      fix: upgrade XO\n\nNodes\n  · a fact\n\n✘ check: 1 failed, 1 warning(s)\n"
	if plain.String() != want {
		t.Errorf("text output:\n%s\nwant:\n%s", plain.String(), want)
	}
	if err := r.WriteText(&coloured, true); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(coloured.String(), "\x1b[31m✘\x1b[0m") || strings.Contains(plain.String(), "\x1b[") {
		t.Error("colour must be on the terminal's output only")
	}
	if err := r.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Command  string
		Failed   int
		Warnings int
		Sections []struct {
			Name   string
			Checks []Line
		}
	}
	if err := json.Unmarshal(js.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if got.Failed != 1 || got.Warnings != 1 || len(got.Sections) != 3 || got.Sections[1].Checks[0].Status != Failed || got.Sections[1].Checks[0].Fix != "create a token" {
		t.Errorf("JSON output %s", js.String())
	}
	for _, out := range []string{plain.String(), coloured.String(), js.String()} {
		if strings.Contains(out, secret) {
			t.Error("an output holds the secret")
		}
	}
}
