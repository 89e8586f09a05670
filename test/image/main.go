// Command image builds the controller's container image without a Docker daemon or a registry,
// as ko does: the binary `make build` wrote, on a base like gcr.io/distroless/static-debian12:nonroot,
// written as a tarball in `docker save` format that `ctr images import` and `docker load` read.
//
//	go -C test run ./image -binary $PWD/bin/xenorchestra-cloud-controller-manager -version v1.2.3 -tag IMAGE -o $PWD/dist/image.tar
//	go -C test run ./image -pause -tag IMAGE -o $PWD/dist/pause.tar
//
// `make image` runs the first after `make build`. With -pause it builds test/image/pause instead, a
// program that only waits for SIGTERM, on the same base, for tests that need a container to run.
//
// The image format (layer digests and diffIDs, config, manifest, the archive's manifest.json) is
// go-containerregistry's, the library ko and crane are built on, rather than code of ours; only the
// layers' files are ours. The base is made here rather than pulled, as there is no registry to
// pull from: the build machine's CA bundle (Debian's ca-certificates), /etc/passwd and /etc/group
// with root and nonroot (65532) as distroless has them, /home/nonroot and /tmp. No shell, no
// package database. Every file has a fixed time and owner, so the same binary and CA bundle give
// the same image digest.
package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

const (
	// binaryName is the controller's binary, at the image's root as in the Dockerfile.
	binaryName = "xenorchestra-cloud-controller-manager"
	// pausePkg is the program -pause builds, by import path so that it resolves from any folder
	// of the module.
	pausePkg = "github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/test/image/pause"
	// nonroot is distroless's nonroot user and group, the chart's runAsUser.
	nonroot = 65532
)

// epoch is the time of every file and of the image: fixed, so that builds are reproducible.
var epoch = time.Unix(0, 0).UTC()

// options are the command's flags.
type options struct {
	binary, caBundle, tag, version, source, arch, out string
	pause                                             bool
}

func (o *options) addFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.binary, "binary", "", "the static linux binary to run: the output of `make build` (not with -pause)")
	fs.BoolVar(&o.pause, "pause", false, "build test/image/pause and run it instead of -binary (a test image)")
	fs.StringVar(&o.caBundle, "ca-certificates", "/etc/ssl/certs/ca-certificates.crt", "the CA bundle to install (Debian's ca-certificates package)")
	fs.StringVar(&o.tag, "tag", "", "the image's name and tag (default ghcr.io/xenorchestra-k8s/"+binaryName+":<version>; required with -pause)")
	fs.StringVar(&o.version, "version", "dev", "the version, for the org.opencontainers.image.version label")
	fs.StringVar(&o.source, "source", "https://github.com/xenorchestra-k8s/"+binaryName, "the org.opencontainers.image.source label")
	fs.StringVar(&o.arch, "arch", runtime.GOARCH, "the image's architecture: the GOARCH the binary was built for")
	fs.StringVar(&o.out, "o", "", "the tarball to write (required)")
}

// validate returns every error of the options.
func (o *options) validate() error {
	var errs []error
	switch {
	case o.pause && o.binary != "":
		errs = append(errs, errors.New("-binary and -pause are exclusive"))
	case !o.pause && o.binary == "":
		errs = append(errs, errors.New("-binary or -pause is required"))
	}
	if o.pause && o.tag == "" {
		errs = append(errs, errors.New("-pause needs -tag"))
	}
	if o.out == "" {
		errs = append(errs, errors.New("-o is required"))
	}
	if o.arch == "" {
		errs = append(errs, errors.New("-arch is empty"))
	}
	return errors.Join(errs...)
}

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

// run builds the image the arguments describe, writes it and prints its name and digest on w.
func run(args []string, w io.Writer) error {
	var o options
	fs := flag.NewFlagSet("image", flag.ContinueOnError)
	o.addFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if err := o.validate(); err != nil {
		return err
	}
	if o.tag == "" {
		o.tag = "ghcr.io/xenorchestra-k8s/" + binaryName + ":" + o.version
	}
	tag, err := name.NewTag(o.tag)
	if err != nil {
		return fmt.Errorf("-tag: %w", err)
	}

	binPath, entry := o.binary, binaryName
	if o.pause {
		dir, err := os.MkdirTemp("", "pause-")
		if err != nil {
			return err
		}
		defer func() { _ = os.RemoveAll(dir) }()
		if binPath, err = buildPause(dir, o.arch); err != nil {
			return err
		}
		entry = "pause"
	}
	bin, err := os.ReadFile(binPath)
	if err != nil {
		return fmt.Errorf("read the binary: %w", err)
	}
	ca, err := os.ReadFile(o.caBundle)
	if err != nil || !bytes.Contains(ca, []byte("-----BEGIN CERTIFICATE-----")) {
		return fmt.Errorf("no CA bundle at %s (%v): install Debian's ca-certificates package or pass -ca-certificates", o.caBundle, err)
	}

	img, err := build(ca, entry, bin, o)
	if err != nil {
		return err
	}
	if err := write(o.out, tag, img); err != nil {
		return err
	}
	digest, err := img.Digest()
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s %s@%s\n", o.out, tag, digest)
	return err
}

// buildPause builds test/image/pause static for linux/arch into dir and returns its path.
func buildPause(dir, arch string) (string, error) {
	out := filepath.Join(dir, "pause")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", out, pausePkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("build %s: %w", pausePkg, err)
	}
	return out, nil
}

// build returns the image: the base layer, then a layer with bin at /entry, run as nonroot.
func build(ca []byte, entry string, bin []byte, o options) (v1.Image, error) {
	base, err := layer([]file{
		{name: "etc/", mode: 0o755},
		{name: "etc/group", mode: 0o644, data: []byte("root:x:0:\nnonroot:x:65532:\n")},
		{name: "etc/passwd", mode: 0o644, data: []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")},
		{name: "etc/ssl/", mode: 0o755},
		{name: "etc/ssl/certs/", mode: 0o755},
		{name: "etc/ssl/certs/ca-certificates.crt", mode: 0o644, data: ca},
		{name: "home/", mode: 0o755},
		{name: "home/nonroot/", mode: 0o700, owner: nonroot},
		{name: "tmp/", mode: 0o1777},
	})
	if err != nil {
		return nil, err
	}
	app, err := layer([]file{{name: entry, mode: 0o755, data: bin}})
	if err != nil {
		return nil, err
	}
	user := fmt.Sprintf("%d:%d", nonroot, nonroot)
	img, err := mutate.ConfigFile(empty.Image, &v1.ConfigFile{
		Architecture: o.arch,
		OS:           "linux",
		Created:      v1.Time{Time: epoch},
		// Env and WorkingDir are distroless static nonroot's.
		Config: v1.Config{
			User:       user,
			Entrypoint: []string{"/" + entry},
			Env: []string{
				"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
				"SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt",
			},
			WorkingDir: "/home/nonroot",
			Labels: map[string]string{
				"org.opencontainers.image.version": o.version,
				"org.opencontainers.image.source":  o.source,
			},
		},
		RootFS: v1.RootFS{Type: "layers"},
	})
	if err != nil {
		return nil, err
	}
	return mutate.Append(img,
		mutate.Addendum{Layer: base, History: v1.History{Created: v1.Time{Time: epoch}, CreatedBy: "test/image: base like distroless static nonroot (CA bundle, passwd, group, /home/nonroot, /tmp)"}},
		mutate.Addendum{Layer: app, History: v1.History{Created: v1.Time{Time: epoch}, CreatedBy: "test/image: COPY " + entry + " /" + entry}},
	)
}

// file is one entry of a layer: a folder if its name ends in /. Owned by root unless owner is set.
type file struct {
	name  string
	mode  int64
	owner int
	data  []byte
}

// layer returns a layer of files with the time epoch, in the order given, as ko makes its own.
func layer(files []file) (v1.Layer, error) {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, f := range files {
		h := &tar.Header{Name: f.name, Mode: f.mode, Uid: f.owner, Gid: f.owner, ModTime: epoch, Typeflag: tar.TypeReg, Size: int64(len(f.data))}
		if strings.HasSuffix(f.name, "/") {
			h.Typeflag, h.Size = tar.TypeDir, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(b.Bytes())), nil
	})
}

// write writes img tagged tag to out, through a temporary file so that out is whole or absent.
func write(out string, tag name.Tag, img v1.Image) error {
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(out), ".image-*.tar")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tarball.Write(tag, img, tmp); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("write %s: %w", out, err)
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	// CreateTemp's 0600 would keep the image from other users.
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), out)
}
