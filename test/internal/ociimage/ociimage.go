// Package ociimage builds the controller's container image without a Docker daemon or a
// registry, as ko does: a static binary on a base like gcr.io/distroless/static-debian12:nonroot,
// written as a `docker save` tarball (WriteTarball: `ctr images import`, `docker load`) or as an
// OCI image layout in a tar archive (WriteLayout: the release's image, for `crane push`,
// `skopeo copy oci-archive:` and `ctr images import`).
//
// The image format (layer digests and diffIDs, config, manifest, index, the archives' metadata)
// is go-containerregistry's, the library ko and crane are built on, rather than code of ours; only
// the layers' files are ours. The base is made here rather than pulled, as there is no registry to
// pull from: the build machine's CA bundle (Debian's ca-certificates), /etc/passwd and /etc/group
// with root and nonroot (65532) as distroless has them, /home/nonroot and /tmp. No shell, no
// package database. Every file, layer and archive entry has a fixed time and owner, so the same
// binary and CA bundle give the same image digest and the same archive, byte for byte.
package ociimage

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// NonRoot is distroless's nonroot user and group, the chart's runAsUser.
const NonRoot = 65532

// Epoch is the time of every file, layer and archive entry, and of the image: fixed, so that
// builds are reproducible.
var Epoch = time.Unix(0, 0).UTC()

// Spec is what an image is made of.
type Spec struct {
	// Entry is the program's name: the file at the image's root, and the entrypoint.
	Entry string
	// Binary is the program, a static linux binary for Arch.
	Binary []byte
	// CABundle is the PEM bundle installed as /etc/ssl/certs/ca-certificates.crt.
	CABundle []byte
	// Arch is the image's architecture: the GOARCH the binary was built for.
	Arch string
	// Version and Source are the org.opencontainers.image.version and .source labels.
	Version, Source string
	// OCI selects OCI media types for the manifest, config and layers (the release's image, for
	// WriteLayout); else Docker's, which is how a `docker save` tarball (WriteTarball) is read
	// back, so that the digest printed is the one `ctr images import` and `docker load` show.
	OCI bool
}

// Build returns the image: the base layer, then a layer with the binary at /Entry, run as
// nonroot.
func Build(s Spec) (v1.Image, error) {
	manifestType, configType, layerType := types.DockerManifestSchema2, types.DockerConfigJSON, types.DockerLayer
	if s.OCI {
		manifestType, configType, layerType = types.OCIManifestSchema1, types.OCIConfigJSON, types.OCILayer
	}
	base, err := layer(layerType, []file{
		{name: "etc/", mode: 0o755},
		{name: "etc/group", mode: 0o644, data: []byte("root:x:0:\nnonroot:x:65532:\n")},
		{name: "etc/passwd", mode: 0o644, data: []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")},
		{name: "etc/ssl/", mode: 0o755},
		{name: "etc/ssl/certs/", mode: 0o755},
		{name: "etc/ssl/certs/ca-certificates.crt", mode: 0o644, data: s.CABundle},
		{name: "home/", mode: 0o755},
		{name: "home/nonroot/", mode: 0o700, owner: NonRoot},
		{name: "tmp/", mode: 0o1777},
	})
	if err != nil {
		return nil, err
	}
	app, err := layer(layerType, []file{{name: s.Entry, mode: 0o755, data: s.Binary}})
	if err != nil {
		return nil, err
	}
	user := fmt.Sprintf("%d:%d", NonRoot, NonRoot)
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, manifestType), configType)
	img, err = mutate.ConfigFile(img, &v1.ConfigFile{
		Architecture: s.Arch,
		OS:           "linux",
		Created:      v1.Time{Time: Epoch},
		// Env and WorkingDir are distroless static nonroot's.
		Config: v1.Config{
			User:       user,
			Entrypoint: []string{"/" + s.Entry},
			Env: []string{
				"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
				"SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt",
			},
			WorkingDir: "/home/nonroot",
			Labels: map[string]string{
				"org.opencontainers.image.version": s.Version,
				"org.opencontainers.image.source":  s.Source,
			},
		},
		RootFS: v1.RootFS{Type: "layers"},
	})
	if err != nil {
		return nil, err
	}
	return mutate.Append(img,
		mutate.Addendum{Layer: base, History: v1.History{Created: v1.Time{Time: Epoch}, CreatedBy: "test/image: base like distroless static nonroot (CA bundle, passwd, group, /home/nonroot, /tmp)"}},
		mutate.Addendum{Layer: app, History: v1.History{Created: v1.Time{Time: Epoch}, CreatedBy: "test/image: COPY " + s.Entry + " /" + s.Entry}},
	)
}

// file is one entry of a layer: a folder if its name ends in /. Owned by root unless owner is set.
type file struct {
	name  string
	mode  int64
	owner int
	data  []byte
}

// layer returns a layer of media type mt of files with the time Epoch, in the order given, as
// ko makes its own.
func layer(mt types.MediaType, files []file) (v1.Layer, error) {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, f := range files {
		h := &tar.Header{Name: f.name, Mode: f.mode, Uid: f.owner, Gid: f.owner, ModTime: Epoch, Typeflag: tar.TypeReg, Size: int64(len(f.data))}
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
	}, tarball.WithMediaType(mt))
}

// WriteTarball writes img tagged tag to out in `docker save` format.
func WriteTarball(out string, tag name.Tag, img v1.Image) error {
	return writeAtomically(out, func(w io.Writer) error { return tarball.Write(tag, img, w) })
}

// WriteLayout writes img to out as an OCI image layout (oci-layout, index.json, blobs/) in a tar
// archive, its index entry annotated with tag (org.opencontainers.image.ref.name, the tag, and
// io.containerd.image.name, the whole name, which `ctr images import` names it by) and platform.
func WriteLayout(out string, tag name.Tag, img v1.Image) error {
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "oci-layout-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	if err := p.AppendImage(img,
		layout.WithAnnotations(map[string]string{
			"org.opencontainers.image.ref.name": tag.TagStr(),
			"io.containerd.image.name":          tag.Name(),
		}),
		layout.WithPlatform(v1.Platform{OS: cf.OS, Architecture: cf.Architecture}),
	); err != nil {
		return fmt.Errorf("write the OCI layout: %w", err)
	}
	return writeAtomically(out, func(w io.Writer) error { return tarDir(w, dir) })
}

// tarDir writes the files under dir to w as a tar archive: in lexical order, folders before
// what they hold, with the time Epoch, owned by root, folders 0755 and files 0644, so that the
// same files give the same archive. (No archive library here writes a folder reproducibly.)
func tarDir(w io.Writer, dir string) error {
	var paths []string
	if err := filepath.WalkDir(dir, func(p string, _ fs.DirEntry, err error) error {
		if err == nil && p != dir {
			paths = append(paths, p)
		}
		return err
	}); err != nil {
		return err
	}
	slices.Sort(paths)
	tw := tar.NewWriter(w)
	for _, p := range paths {
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		h := &tar.Header{Name: filepath.ToSlash(rel), Mode: 0o644, ModTime: Epoch, Typeflag: tar.TypeReg}
		switch {
		case fi.IsDir():
			h.Name, h.Mode, h.Typeflag = h.Name+"/", 0o755, tar.TypeDir
		case fi.Mode().IsRegular():
			h.Size = fi.Size()
		default:
			return fmt.Errorf("%s: not a regular file or a folder", p)
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if h.Typeflag == tar.TypeReg {
			if err := copyFile(tw, p); err != nil {
				return err
			}
		}
	}
	return tw.Close()
}

func copyFile(w io.Writer, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(w, f)
	return err
}

// Untar extracts a tar archive of folders and regular files into dir: an OCI layout WriteLayout
// wrote, which crane push reads as a folder, or `git archive`'s (its global header skipped).
func Untar(r io.Reader, dir string) error {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		p := filepath.Join(dir, filepath.FromSlash(h.Name))
		if !strings.HasPrefix(p, filepath.Clean(dir)+string(filepath.Separator)) {
			return fmt.Errorf("entry %s leaves the folder", h.Name)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(p, 0o755)
		case tar.TypeReg:
			if err = os.MkdirAll(filepath.Dir(p), 0o755); err == nil {
				err = writeFile(p, tr, h.FileInfo().Mode().Perm())
			}
		case tar.TypeXGlobalHeader:
		default:
			err = fmt.Errorf("entry %s: type %c", h.Name, h.Typeflag)
		}
		if err != nil {
			return err
		}
	}
}

// writeFile writes what r reads to a new file of mode perm.
func writeFile(path string, r io.Reader, perm os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// writeAtomically writes out with write, through a temporary file in its folder, so that out is
// whole or absent.
func writeAtomically(out string, write func(io.Writer) error) error {
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(out), ".image-*.tar")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := write(tmp); err != nil {
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
