package config

import (
	"crypto/tls"
	"encoding/pem"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
)

// serverCA returns a TLS test server and its certificate as PEM.
func serverCA(t *testing.T) (*httptest.Server, string) {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok"))
	}))
	// The failed handshakes are expected.
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}))
}

// get reports whether an HTTPS GET to srv succeeds with tc.
func get(srv *httptest.Server, tc *tls.Config) error {
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: tc}}
	resp, err := c.Get(srv.URL)
	if err != nil {
		return err
	}
	return resp.Body.Close()
}

func TestTLSConfig(t *testing.T) {
	srv, caPEM := serverCA(t)
	dir := t.TempDir()
	caFile := writeFile(t, dir, "ca.pem", "# our private CA\n"+caPEM)

	tests := []struct {
		name    string
		mod     func(*Cluster)
		connect bool
	}{
		{"system roots only", func(*Cluster) {}, false},
		{"caBundle", func(c *Cluster) { c.CABundle = caPEM }, true},
		{"caFile", func(c *Cluster) { c.CAFile = caFile }, true},
		{"insecure", func(c *Cluster) { c.Insecure = true }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := validConfig()
			c := &cfg.Clusters[0]
			tt.mod(c)
			if err := cfg.Validate(); err != nil {
				t.Fatalf("Validate: %v", err)
			}
			tc, err := c.TLSConfig()
			if err != nil {
				t.Fatalf("TLSConfig: %v", err)
			}
			if tc.MinVersion != tls.VersionTLS12 {
				t.Errorf("MinVersion = %x", tc.MinVersion)
			}
			if tc.InsecureSkipVerify != c.Insecure {
				t.Errorf("InsecureSkipVerify = %v, want %v", tc.InsecureSkipVerify, c.Insecure)
			}
			err = get(srv, tc)
			if tt.connect && err != nil {
				t.Errorf("GET failed: %v", err)
			}
			if !tt.connect && err == nil {
				t.Error("GET to a server with an unknown CA succeeded")
			}
		})
	}
}

func TestTLSConfigErrors(t *testing.T) {
	_, caPEM := serverCA(t)
	keyPEM := "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"
	badCert := "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"
	for name, c := range map[string]*Cluster{
		"both":        {CAFile: "/x", CABundle: caPEM},
		"missing":     {CAFile: filepath.Join(t.TempDir(), "none.pem")},
		"private key": {CABundle: caPEM + keyPEM},
		"bad cert":    {CABundle: badCert},
		"empty":       {CABundle: "not pem"},
	} {
		if _, err := c.TLSConfig(); err == nil {
			t.Errorf("%s: TLSConfig succeeded", name)
		}
	}
	// The same problems are found by Load, naming the key.
	for name, tt := range map[string]struct{ bundle, want string }{
		"private key": {caPEM + keyPEM, `PEM block 2 is "PRIVATE KEY"`},
		"bad cert":    {badCert, "PEM block 1"},
	} {
		_, err := loadString(t, base+"caBundle: |\n  "+strings.ReplaceAll(strings.TrimSpace(tt.bundle), "\n", "\n  ")+"\n", nil)
		if err == nil || !strings.Contains(err.Error(), "caBundle: Invalid value: "+tt.want) {
			t.Errorf("%s: Load = %v, want caBundle: %s", name, err, tt.want)
		}
	}
}

func TestLoadCAFileRelative(t *testing.T) {
	_, caPEM := serverCA(t)
	dir := t.TempDir()
	writeFile(t, dir, "ca.pem", caPEM)
	c, err := Load(writeFile(t, dir, "c.yaml", base+"caFile: ca.pem\n"), nil)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if want := filepath.Join(dir, "ca.pem"); c.Clusters[0].CAFile != want {
		t.Errorf("CAFile = %q, want %q", c.Clusters[0].CAFile, want)
	}
	if _, err := c.Clusters[0].TLSConfig(); err != nil {
		t.Errorf("TLSConfig: %v", err)
	}
}

func TestWarnings(t *testing.T) {
	tests := []struct {
		name string
		mod  func(*Config)
		want []string
	}{
		{"none", func(*Config) {}, nil},
		{"insecure", func(c *Config) { c.Clusters[0].Insecure = true }, []string{"XO server xoa.example.com: insecure is true"}},
		{"insecure with CA", func(c *Config) { c.Clusters[0].Insecure, c.Clusters[0].CABundle = true, "x" },
			[]string{"not verified", "checked but not used while insecure"}},
		{"http", func(c *Config) { c.Clusters[0].URL = "http://xoa.example.com" }, []string{"XO server xoa.example.com: url uses http"}},
		{"region unused", func(c *Config) { c.Clusters[0].Region = "eu" }, []string{`region has no effect unless topology.region is "server"`}},
		{"region used", func(c *Config) { c.Clusters[0].Region, c.Topology.Region = "eu", RegionServer }, nil},
		{"each server", func(c *Config) {
			c.Clusters = append(c.Clusters, server(), server())
			c.Clusters[1].Name, c.Clusters[1].Insecure = "b", true
			c.Clusters[2].Name, c.Clusters[2].URL = "c", "http://c"
		}, []string{"XO server b: insecure", "XO server c: url uses http"}},
		{"disabled, and nothing else said of it", func(c *Config) {
			c.Clusters = append(c.Clusters, server())
			c.Clusters[1].Name, c.Clusters[1].URL, c.Clusters[1].Enabled = "b", "http://b", new(false)
		}, []string{"XO server b: enabled is false: not connected and not waited for"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := validConfig()
			tt.mod(c)
			got := c.Warnings()
			if len(got) != len(tt.want) {
				t.Fatalf("Warnings = %q, want %d", got, len(tt.want))
			}
			for i, w := range tt.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("warning %d = %q, want it to mention %q", i, got[i], w)
				}
			}
		})
	}
}
