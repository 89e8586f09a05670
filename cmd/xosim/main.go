// Command xosim serves a simulated Xen Orchestra REST API (/rest/v0) on loopback, with the
// pools, hosts and VMs of an inventory file (YAML or JSON), for demos and manual testing.
//
//	xosim --inventory hack/demo-inventory.yaml --token-file /tmp/xo-token
//
// The token is read from --token-file (created with a random token when missing) or from the
// XOSIM_TOKEN environment variable; it is never printed. The command prints the URL it serves.
package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/xosim"
)

// tokenEnv is the environment variable holding the token when --token-file is not given.
const tokenEnv = "XOSIM_TOKEN"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Getenv); err != nil {
		fmt.Fprintln(os.Stderr, "xosim:", err)
		os.Exit(1)
	}
}

// options are the command's flags.
type options struct {
	listen           string
	allowNonLoopback bool
	inventory        string
	tokenFile        string
	tls              bool
	tlsCertOut       string
	urlFile          string
	pingInterval     time.Duration
}

func (o *options) addFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.listen, "listen", "127.0.0.1:0", "address to listen on (port 0 picks a free port)")
	fs.BoolVar(&o.allowNonLoopback, "allow-non-loopback", false, "allow a listen address that is not a loopback address")
	fs.StringVar(&o.inventory, "inventory", "", "inventory file (YAML or JSON) with the pools, hosts and VMs to serve (required)")
	fs.StringVar(&o.tokenFile, "token-file", "", "file holding the accepted token; created with a random token when missing (default: $"+tokenEnv+")")
	fs.BoolVar(&o.tls, "tls", false, "serve HTTPS with a self-signed certificate")
	fs.StringVar(&o.tlsCertOut, "tls-cert-out", "", "with --tls, write the certificate (PEM) to this file for clients to trust")
	fs.StringVar(&o.urlFile, "url-file", "", "write the served URL to this file once listening")
	fs.DurationVar(&o.pingInterval, "ping-interval", xosim.DefaultPingInterval, "period of the event stream's ping events")
}

// validate returns every problem with the options.
func (o *options) validate() error {
	var errs []error
	if o.inventory == "" {
		errs = append(errs, errors.New("--inventory is required"))
	}
	host, _, err := net.SplitHostPort(o.listen)
	if err != nil {
		errs = append(errs, fmt.Errorf("--listen %q: %w", o.listen, err))
	} else if !o.allowNonLoopback && !isLoopback(host) {
		errs = append(errs, fmt.Errorf("--listen %q is not a loopback address (use --allow-non-loopback to override)", o.listen))
	}
	if o.tlsCertOut != "" && !o.tls {
		errs = append(errs, errors.New("--tls-cert-out needs --tls"))
	}
	if o.pingInterval <= 0 {
		errs = append(errs, errors.New("--ping-interval must be positive"))
	}
	return errors.Join(errs...)
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func run(ctx context.Context, args []string, stdout io.Writer, getenv func(string) string) error {
	var o options
	fs := flag.NewFlagSet("xosim", flag.ContinueOnError)
	o.addFlags(fs)
	fs.Usage = func() {
		_, _ = fmt.Fprint(fs.Output(), "Usage: xosim --inventory FILE [flags]\n\n"+
			"Serves a simulated Xen Orchestra REST API (/rest/v0) with the pools, hosts and VMs of an\n"+
			"inventory file (YAML or JSON). The token comes from --token-file or $"+tokenEnv+".\n\nFlags:\n")
		fs.PrintDefaults()
	}
	// Help goes to stdout with success; a bad flag is returned as an error for main to print.
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stdout)
			fs.Usage()
			return nil
		}
		return fmt.Errorf("%w (see xosim --help)", err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	if err := o.validate(); err != nil {
		return err
	}
	token, err := loadToken(o.tokenFile, getenv)
	if err != nil {
		return err
	}
	data, err := os.ReadFile(o.inventory)
	if err != nil {
		return fmt.Errorf("read inventory: %w", err)
	}
	jsonData, err := yaml.YAMLToJSON(data)
	if err != nil {
		return fmt.Errorf("inventory %s: %w", o.inventory, err)
	}
	sim := xosim.New(xosim.Options{Tokens: []string{token}, PingInterval: o.pingInterval})
	if err := sim.LoadInventory(jsonData); err != nil {
		return fmt.Errorf("inventory %s: %w", o.inventory, err)
	}

	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	srv := &http.Server{Handler: sim, ReadHeaderTimeout: 10 * time.Second}
	scheme := "http"
	if o.tls {
		cert, certPEM, err := selfSignedCert(ln.Addr())
		if err != nil {
			_ = ln.Close()
			return err
		}
		if o.tlsCertOut != "" {
			if err := os.WriteFile(o.tlsCertOut, certPEM, 0o644); err != nil {
				_ = ln.Close()
				return fmt.Errorf("write certificate: %w", err)
			}
		}
		srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
		ln = tls.NewListener(ln, srv.TLSConfig)
		scheme = "https"
	}
	url := scheme + "://" + ln.Addr().String()
	if o.urlFile != "" {
		if err := os.WriteFile(o.urlFile, []byte(url+"\n"), 0o644); err != nil {
			_ = ln.Close()
			return fmt.Errorf("write url file: %w", err)
		}
	}
	pools, hosts, vms := sim.Counts()
	_, _ = fmt.Fprintf(stdout, "xosim: serving %d pools, %d hosts, %d VMs at %s (REST API %s%s)\n", pools, hosts, vms, url, url, xosim.BasePath)

	errCh := make(chan error, 1)
	go func() { errCh <- srv.Serve(ln) }()
	select {
	case err := <-errCh:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	sim.CloseEventStreams()
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		_ = srv.Close()
	}
	return nil
}

// loadToken reads the token from file (creating the file with a random token when it does not
// exist) or from the environment.
func loadToken(file string, getenv func(string) string) (string, error) {
	if file == "" {
		t := strings.TrimSpace(getenv(tokenEnv))
		if t == "" {
			return "", fmt.Errorf("no token: set --token-file or $%s", tokenEnv)
		}
		return t, nil
	}
	data, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		var b [32]byte
		if _, err := rand.Read(b[:]); err != nil {
			return "", fmt.Errorf("generate token: %w", err)
		}
		t := base64.RawURLEncoding.EncodeToString(b[:])
		if err := os.WriteFile(file, []byte(t+"\n"), 0o600); err != nil {
			return "", fmt.Errorf("write token file: %w", err)
		}
		return t, nil
	}
	if err != nil {
		return "", fmt.Errorf("read token file: %w", err)
	}
	t := strings.TrimSpace(string(data))
	if t == "" {
		return "", fmt.Errorf("token file %s is empty", file)
	}
	return t, nil
}

// selfSignedCert makes a certificate for the loopback names and the listen address.
func selfSignedCert(addr net.Addr) (tls.Certificate, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("generate key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("generate serial: %w", err)
	}
	ips := []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	if ta, ok := addr.(*net.TCPAddr); ok && !ta.IP.IsUnspecified() {
		ips = append(ips, ta.IP)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "xosim"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(7 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		DNSNames:              []string{"localhost"},
		IPAddresses:           ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("create certificate: %w", err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, certPEM, nil
}
