// Command image builds the controller's container image without a Docker daemon or a registry
// (test/internal/ociimage): the binary `make build` wrote, on a base like
// gcr.io/distroless/static-debian12:nonroot, written as a tarball in `docker save` format that
// `ctr images import` and `docker load` read (-o), and/or as an OCI image layout in a tar archive
// (-oci), the release's format, that `crane push` (once extracted), `skopeo copy oci-archive:`
// and `ctr images import` read.
//
//	go -C test run ./image -binary $PWD/bin/xenorchestra-cloud-controller-manager -version v1.2.3 -tag IMAGE -o $PWD/dist/image.tar
//	go -C test run ./image -pause -tag IMAGE -oci $PWD/dist/pause.oci.tar
//
// `make image` runs the first after `make build`; `make release` builds its image with the same
// package. With -pause it builds test/image/pause instead, a program that only waits for
// SIGTERM, on the same base, for tests that need a container to run.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/test/internal/ociimage"
)

const (
	// binaryName is the controller's binary, at the image's root as in the Dockerfile.
	binaryName = "xenorchestra-cloud-controller-manager"
	// pausePkg is the program -pause builds, by import path so that it resolves from any folder
	// of the module.
	pausePkg = "github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/test/image/pause"
)

// options are the command's flags.
type options struct {
	binary, caBundle, tag, version, source, arch, out, oci string
	pause                                                  bool
}

func (o *options) addFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.binary, "binary", "", "the static linux binary to run: the output of `make build` (not with -pause)")
	fs.BoolVar(&o.pause, "pause", false, "build test/image/pause and run it instead of -binary (a test image)")
	fs.StringVar(&o.caBundle, "ca-certificates", "/etc/ssl/certs/ca-certificates.crt", "the CA bundle to install (Debian's ca-certificates package)")
	fs.StringVar(&o.tag, "tag", "", "the image's name and tag (default ghcr.io/xenorchestra-k8s/"+binaryName+":<version>; required with -pause)")
	fs.StringVar(&o.version, "version", "dev", "the version, for the org.opencontainers.image.version label")
	fs.StringVar(&o.source, "source", "https://github.com/xenorchestra-k8s/"+binaryName, "the org.opencontainers.image.source label")
	fs.StringVar(&o.arch, "arch", runtime.GOARCH, "the image's architecture: the GOARCH the binary was built for")
	fs.StringVar(&o.out, "o", "", "the `docker save` tarball to write (-o or -oci is required)")
	fs.StringVar(&o.oci, "oci", "", "the OCI image layout to write, as a tar archive")
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
	if o.out == "" && o.oci == "" {
		errs = append(errs, errors.New("-o or -oci is required"))
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

// run builds the image the arguments describe, writes it and prints, for each file written, its
// path, name and digest on w.
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

	for _, out := range []struct {
		path  string
		oci   bool
		write func(string, name.Tag, v1.Image) error
	}{{o.out, false, ociimage.WriteTarball}, {o.oci, true, ociimage.WriteLayout}} {
		if out.path == "" {
			continue
		}
		img, err := ociimage.Build(ociimage.Spec{Entry: entry, Binary: bin, CABundle: ca, Arch: o.arch, Version: o.version, Source: o.source, OCI: out.oci})
		if err != nil {
			return err
		}
		digest, err := img.Digest()
		if err != nil {
			return err
		}
		if err := out.write(out.path, tag, img); err != nil {
			return err
		}
		if _, err := fmt.Fprintf(w, "%s %s@%s\n", out.path, tag, digest); err != nil {
			return err
		}
	}
	return nil
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
