package main

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/test/internal/ociimage"
)

const testTag = "example.test/xenorchestra-ccm:v9.9.9-test"

// fakeCA stands for the build machine's bundle, so that the tests do not depend on it.
var fakeCA = []byte("-----BEGIN CERTIFICATE-----\nZmFrZQ==\n-----END CERTIFICATE-----\n")

// entry is one file of an image's flattened file system.
type entry struct {
	hdr  *tar.Header
	data []byte
}

// writeFile writes data to a new file of dir and returns its path.
func writeFile(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// buildImage runs the command with args and -ca-certificates, -tag and -o set, reads the tarball
// back and returns the image and its file.
func buildImage(t *testing.T, args ...string) (v1.Image, string) {
	t.Helper()
	dir := t.TempDir()
	out := filepath.Join(dir, "out", "image.tar")
	args = append(args, "-ca-certificates", writeFile(t, dir, "ca.crt", fakeCA), "-tag", testTag, "-o", out)
	var stdout bytes.Buffer
	if err := run(args, &stdout); err != nil {
		t.Fatalf("run %q: %v", args, err)
	}
	tag, err := name.NewTag(testTag)
	if err != nil {
		t.Fatal(err)
	}
	img, err := tarball.ImageFromPath(out, &tag)
	if err != nil {
		t.Fatalf("read %s back: %v", out, err)
	}
	digest, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	if want := out + " " + testTag + "@" + digest.String() + "\n"; stdout.String() != want {
		t.Errorf("printed %q, want %q", stdout.String(), want)
	}
	return img, out
}

// files returns the image's flattened file system by path.
func files(t *testing.T, img v1.Image) map[string]entry {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	fs := map[string]entry{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return fs
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		fs[strings.TrimSuffix(h.Name, "/")] = entry{h, data}
	}
}

// checkImage checks what every image of the command has: its config and its base, with bin as
// /entrypoint.
func checkImage(t *testing.T, img v1.Image, entrypoint string, bin []byte) {
	t.Helper()
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.OS != "linux" || cf.Architecture == "" {
		t.Errorf("platform %s/%s, want linux/<GOARCH>", cf.OS, cf.Architecture)
	}
	if cf.Config.User != "65532:65532" {
		t.Errorf("user %q, want 65532:65532", cf.Config.User)
	}
	if want := []string{"/" + entrypoint}; !slices.Equal(cf.Config.Entrypoint, want) {
		t.Errorf("entrypoint %q, want %q", cf.Config.Entrypoint, want)
	}
	if len(cf.Config.Cmd) != 0 {
		t.Errorf("cmd %q, want none", cf.Config.Cmd)
	}
	if cf.Config.Labels["org.opencontainers.image.source"] == "" {
		t.Error("no org.opencontainers.image.source label")
	}

	fs := files(t, img)
	want := map[string]struct {
		mode  int64
		owner int
		dir   bool
	}{
		"etc":                               {0o755, 0, true},
		"etc/group":                         {0o644, 0, false},
		"etc/passwd":                        {0o644, 0, false},
		"etc/ssl":                           {0o755, 0, true},
		"etc/ssl/certs":                     {0o755, 0, true},
		"etc/ssl/certs/ca-certificates.crt": {0o644, 0, false},
		"home":                              {0o755, 0, true},
		"home/nonroot":                      {0o700, ociimage.NonRoot, true},
		"tmp":                               {0o1777, 0, true},
		entrypoint:                          {0o755, 0, false},
	}
	for p, e := range fs {
		w, ok := want[p]
		if !ok {
			t.Errorf("unexpected file /%s", p)
			continue
		}
		h := e.hdr
		if dir := h.Typeflag == tar.TypeDir; dir != w.dir || (!dir && h.Typeflag != tar.TypeReg) {
			t.Errorf("/%s: type %c, want a %s", p, h.Typeflag, map[bool]string{true: "folder", false: "regular file"}[w.dir])
		}
		if h.Mode != w.mode || h.Uid != w.owner || h.Gid != w.owner {
			t.Errorf("/%s: mode %o owner %d:%d, want %o %d:%d", p, h.Mode, h.Uid, h.Gid, w.mode, w.owner, w.owner)
		}
		if !h.ModTime.Equal(time.Unix(0, 0)) {
			t.Errorf("/%s: modified %s, want the epoch (reproducible builds)", p, h.ModTime)
		}
	}
	for p := range want {
		if _, ok := fs[p]; !ok {
			t.Errorf("no /%s", p)
		}
	}
	for _, sh := range []string{"bin/sh", "bin/bash", "bin/busybox", "usr/bin/sh"} {
		if _, ok := fs[sh]; ok {
			t.Errorf("/%s in the image: distroless has no shell", sh)
		}
	}
	if got := fs[entrypoint].data; bin != nil && !bytes.Equal(got, bin) {
		t.Errorf("/%s is not the binary given (%d bytes, want %d)", entrypoint, len(got), len(bin))
	}
	if got := fs["etc/ssl/certs/ca-certificates.crt"].data; !bytes.Equal(got, fakeCA) {
		t.Errorf("CA bundle %q, want the -ca-certificates file", got)
	}
	passwd := strings.Split(string(fs["etc/passwd"].data), "\n")
	for _, l := range []string{"root:x:0:0:root:/root:/sbin/nologin", "nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin"} {
		if !slices.Contains(passwd, l) {
			t.Errorf("/etc/passwd has no line %q:\n%s", l, fs["etc/passwd"].data)
		}
	}
	group := strings.Split(string(fs["etc/group"].data), "\n")
	for _, l := range []string{"root:x:0:", "nonroot:x:65532:"} {
		if !slices.Contains(group, l) {
			t.Errorf("/etc/group has no line %q:\n%s", l, fs["etc/group"].data)
		}
	}
}

func TestImage(t *testing.T) {
	bin := []byte("\x7fELF not really a binary\n")
	binPath := writeFile(t, t.TempDir(), "fake", bin)
	img, out := buildImage(t, "-binary", binPath, "-version", "v9.9.9-test", "-arch", "arm64")
	checkImage(t, img, binaryName, bin)

	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.Architecture != "arm64" {
		t.Errorf("architecture %s, want -arch arm64", cf.Architecture)
	}
	if v := cf.Config.Labels["org.opencontainers.image.version"]; v != "v9.9.9-test" {
		t.Errorf("version label %q, want v9.9.9-test", v)
	}
	if fi, err := os.Stat(out); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("%s: %v, %v; want mode 0644", out, fi.Mode(), err)
	}

	// The same inputs give the same image, and the same archive, byte for byte.
	again, out2 := buildImage(t, "-binary", binPath, "-version", "v9.9.9-test", "-arch", "arm64")
	d1, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	d2, err := again.Digest()
	if err != nil {
		t.Fatal(err)
	}
	if d1 != d2 {
		t.Errorf("two builds of the same binary: digests %s and %s", d1, d2)
	}
	b1, _ := os.ReadFile(out)
	b2, _ := os.ReadFile(out2)
	if !bytes.Equal(b1, b2) {
		t.Error("two builds of the same binary wrote different archives")
	}
}

// TestOCILayout: -oci writes the same image as an OCI image layout in a tar archive, with OCI
// media types, its index entry named after the tag and its platform, reproducibly; -o and -oci
// together write both.
func TestOCILayout(t *testing.T) {
	dir := t.TempDir()
	bin := writeFile(t, dir, "fake", []byte("\x7fELF not really a binary\n"))
	ca := writeFile(t, dir, "ca.crt", fakeCA)
	build := func(out string) []byte {
		t.Helper()
		args := []string{"-binary", bin, "-version", "v9.9.9-test", "-ca-certificates", ca, "-tag", testTag, "-o", filepath.Join(dir, "docker.tar"), "-oci", out}
		var stdout bytes.Buffer
		if err := run(args, &stdout); err != nil {
			t.Fatalf("run %q: %v", args, err)
		}
		if lines := strings.Split(strings.TrimSpace(stdout.String()), "\n"); len(lines) != 2 || !strings.HasPrefix(lines[1], out+" "+testTag+"@sha256:") {
			t.Errorf("printed %q, want a line for each archive", stdout.String())
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	out := filepath.Join(dir, "image.oci.tar")
	first := build(out)
	if again := build(filepath.Join(dir, "again.oci.tar")); !bytes.Equal(first, again) {
		t.Error("two builds of the same binary wrote different OCI archives")
	}

	// Read back with the library's layout reader, from the extracted archive as crane push does.
	checkEntries(t, first)
	extracted := filepath.Join(dir, "layout")
	if err := ociimage.Untar(bytes.NewReader(first), extracted); err != nil {
		t.Fatal(err)
	}
	idx, err := layout.ImageIndexFromPath(extracted)
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != 1 {
		t.Fatalf("index holds %d manifests, want 1", len(im.Manifests))
	}
	desc := im.Manifests[0]
	if desc.MediaType != types.OCIManifestSchema1 {
		t.Errorf("manifest media type %s, want %s", desc.MediaType, types.OCIManifestSchema1)
	}
	if got := desc.Annotations["org.opencontainers.image.ref.name"]; got != "v9.9.9-test" {
		t.Errorf("ref.name annotation %q, want the tag", got)
	}
	if got := desc.Annotations["io.containerd.image.name"]; got != testTag {
		t.Errorf("io.containerd.image.name annotation %q, want %s", got, testTag)
	}
	if desc.Platform == nil || desc.Platform.OS != "linux" || desc.Platform.Architecture == "" {
		t.Errorf("platform %+v, want linux/<arch>", desc.Platform)
	}
	img, err := idx.Image(desc.Digest)
	if err != nil {
		t.Fatal(err)
	}
	checkImage(t, img, binaryName, []byte("\x7fELF not really a binary\n"))
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if m.Config.MediaType != types.OCIConfigJSON {
		t.Errorf("config media type %s, want %s", m.Config.MediaType, types.OCIConfigJSON)
	}
	for _, l := range m.Layers {
		if l.MediaType != types.OCILayer {
			t.Errorf("layer media type %s, want %s", l.MediaType, types.OCILayer)
		}
	}
	// The docker save tarball holds the same config and layers, under Docker's media types.
	tag, _ := name.NewTag(testTag)
	docker, err := tarball.ImageFromPath(filepath.Join(dir, "docker.tar"), &tag)
	if err != nil {
		t.Fatal(err)
	}
	dm, err := docker.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if dm.Config.Digest != m.Config.Digest || len(dm.Layers) != len(m.Layers) {
		t.Fatalf("-o wrote config %s and %d layers, -oci %s and %d", dm.Config.Digest, len(dm.Layers), m.Config.Digest, len(m.Layers))
	}
	for i := range m.Layers {
		if dm.Layers[i].Digest != m.Layers[i].Digest {
			t.Errorf("layer %d: -o wrote %s, -oci %s", i, dm.Layers[i].Digest, m.Layers[i].Digest)
		}
	}
}

// checkEntries checks that every entry of a tar archive has the time 0 and root as owner.
func checkEntries(t *testing.T, archive []byte) {
	t.Helper()
	tr := tar.NewReader(bytes.NewReader(archive))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		if !h.ModTime.Equal(time.Unix(0, 0)) || h.Uid != 0 || h.Gid != 0 {
			t.Errorf("archive entry %s: modified %s, owner %d:%d; want the epoch and root", h.Name, h.ModTime, h.Uid, h.Gid)
		}
	}
}

// TestPauseImage builds the pause image and runs its binary: it waits until SIGTERM, then exits 0.
func TestPauseImage(t *testing.T) {
	img, _ := buildImage(t, "-pause")
	checkImage(t, img, "pause", nil)

	pause := writeFile(t, t.TempDir(), "pause", files(t, img)["pause"].data)
	if err := os.Chmod(pause, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(pause)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		t.Fatalf("pause exited before any signal: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("pause after SIGTERM: %v, want exit 0", err)
		}
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("pause still running 10 s after SIGTERM")
	}
}

func TestImageErrors(t *testing.T) {
	dir := t.TempDir()
	bin := writeFile(t, dir, "bin", []byte("fake"))
	ca := writeFile(t, dir, "ca.crt", fakeCA)
	notCA := writeFile(t, dir, "empty.crt", nil)
	out := filepath.Join(dir, "image.tar")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no binary", []string{"-o", out}, "-binary or -pause is required"},
		{"binary and pause", []string{"-binary", bin, "-pause", "-tag", testTag, "-o", out}, "exclusive"},
		{"pause without tag", []string{"-pause", "-o", out}, "-pause needs -tag"},
		{"no output", []string{"-binary", bin}, "-o or -oci is required"},
		{"bad tag", []string{"-binary", bin, "-tag", "Not A Tag", "-ca-certificates", ca, "-o", out}, "-tag"},
		{"missing binary", []string{"-binary", filepath.Join(dir, "absent"), "-ca-certificates", ca, "-o", out}, "read the binary"},
		{"missing CA bundle", []string{"-binary", bin, "-ca-certificates", filepath.Join(dir, "absent.crt"), "-o", out}, "install Debian's ca-certificates"},
		{"CA bundle without certificates", []string{"-binary", bin, "-ca-certificates", notCA, "-o", out}, "no CA bundle at " + notCA},
		{"arguments", []string{"-binary", bin, "-o", out, "extra"}, "unexpected arguments"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := run(tc.args, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("run %q: %v, want an error with %q", tc.args, err, tc.want)
			}
			if _, err := os.Stat(out); err == nil {
				t.Errorf("%s written despite the error", out)
			}
		})
	}
}
