package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/internal/testenv"
)

// mainEnv makes the test binary run the command's main (see TestHelpExitsZero).
const mainEnv = "XOSIM_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(mainEnv) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func noEnv(string) string { return "" }

// start runs the command until the test ends and returns the URL it serves.
func start(t *testing.T, args []string, getenv func(string) string) (string, *testenv.SyncBuffer) {
	t.Helper()
	dir := t.TempDir()
	urlFile := filepath.Join(dir, "url")
	args = append(args, "--url-file", urlFile)
	ctx, cancel := context.WithCancel(context.Background())
	out := &testenv.SyncBuffer{}
	done := make(chan error, 1)
	go func() { done <- run(ctx, args, out, getenv) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("run: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("run did not stop")
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-done:
			t.Fatalf("run ended: %v", err)
		default:
		}
		if b, err := os.ReadFile(urlFile); err == nil && len(b) > 0 {
			return strings.TrimSpace(string(b)), out
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("no URL written")
	return "", nil
}

func get(t *testing.T, client *http.Client, url, token string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("Cookie", "authenticationToken="+token)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestServeDemoInventory(t *testing.T) {
	tokenFile := filepath.Join(t.TempDir(), "token")
	url, out := start(t, []string{"--inventory", "../../hack/demo-inventory.yaml", "--token-file", tokenFile}, noEnv)
	token, err := os.ReadFile(tokenFile)
	if err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(tokenFile); fi.Mode().Perm() != 0o600 {
		t.Errorf("token file mode %v", fi.Mode().Perm())
	}
	tok := strings.TrimSpace(string(token))
	if len(tok) != 43 {
		t.Errorf("generated token has %d characters, want 43 like XO's", len(tok))
	}
	status, body := get(t, http.DefaultClient, url+"/rest/v0/vms?fields=name_label&filter=name_label:k8s-cp-1", tok)
	if status != 200 || !strings.Contains(body, `"k8s-cp-1"`) {
		t.Errorf("GET vms: %d %s", status, body)
	}
	if status, _ := get(t, http.DefaultClient, url+"/rest/v0/vms", "wrong"); status != 401 {
		t.Errorf("wrong token: %d", status)
	}
	if !strings.Contains(out.String(), "serving 2 pools, 6 hosts, 8 VMs at "+url) {
		t.Errorf("output %q", out.String())
	}
	if strings.Contains(out.String(), tok) {
		t.Error("token printed")
	}
}

func TestServeTLSWithEnvToken(t *testing.T) {
	certFile := filepath.Join(t.TempDir(), "cert.pem")
	env := func(k string) string {
		if k == tokenEnv {
			return "env-token"
		}
		return ""
	}
	url, _ := start(t, []string{"--inventory", "../../hack/demo-inventory.yaml", "--tls", "--tls-cert-out", certFile, "--listen", "localhost:0"}, env)
	if !strings.HasPrefix(url, "https://127.0.0.1:") {
		t.Fatalf("url %s", url)
	}
	pem, err := os.ReadFile(certFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		t.Fatal("bad certificate PEM")
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	if status, body := get(t, client, url+"/rest/v0/pools", "env-token"); status != 200 || !strings.Contains(body, "/rest/v0/pools/") {
		t.Errorf("GET pools over TLS: %d %s", status, body)
	}
}

func TestHelpExitsZero(t *testing.T) {
	for _, arg := range []string{"--help", "-h"} {
		cmd := exec.Command(os.Args[0], arg)
		cmd.Env = append(os.Environ(), mainEnv+"=1")
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Errorf("xosim %s: %v; stderr %q", arg, err, stderr.String())
		}
		if !strings.HasPrefix(stdout.String(), "Usage: xosim") || !strings.Contains(stdout.String(), "-inventory") {
			t.Errorf("xosim %s printed %q", arg, stdout.String())
		}
	}
	// A bad flag still fails, with a pointer to the help.
	cmd := exec.Command(os.Args[0], "--no-such-flag")
	cmd.Env = append(os.Environ(), mainEnv+"=1")
	out, err := cmd.CombinedOutput()
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) || exitErr.ExitCode() != 1 || !strings.Contains(string(out), "see xosim --help") {
		t.Errorf("xosim --no-such-flag: %v, %q", err, out)
	}
}

func TestOptionErrors(t *testing.T) {
	dir := t.TempDir()
	emptyToken := filepath.Join(dir, "empty")
	if err := os.WriteFile(emptyToken, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	badInv := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(badInv, []byte("pools:\n- name: a\n  colour: red\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		args []string
		want []string
	}{
		{[]string{}, []string{"--inventory is required"}},
		{[]string{"--listen", "0.0.0.0:0", "--tls-cert-out", "x", "--ping-interval", "0s"}, []string{
			"--inventory is required", "is not a loopback address", "--tls-cert-out needs --tls", "--ping-interval must be positive"}},
		{[]string{"--inventory", "x.yaml"}, []string{"no token: set --token-file or $XOSIM_TOKEN"}},
		{[]string{"--inventory", "x.yaml", "--token-file", emptyToken}, []string{"is empty"}},
		{[]string{"--inventory", filepath.Join(dir, "missing.yaml"), "--token-file", filepath.Join(dir, "t")}, []string{"read inventory"}},
		{[]string{"--inventory", badInv, "--token-file", filepath.Join(dir, "t")}, []string{`unknown key "pools[0].colour"`}},
		{[]string{"extra"}, []string{"unexpected arguments: extra"}},
	}
	for _, tt := range tests {
		err := run(context.Background(), tt.args, io.Discard, noEnv)
		if err == nil {
			t.Errorf("run(%q): no error", tt.args)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("run(%q) = %v, want it to mention %q", tt.args, err, w)
			}
		}
	}
}
