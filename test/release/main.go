// Command release builds a release of the controller into one folder, as
// `make release VERSION=vX.Y.Z` runs it (DIST, default dist/):
//
//	xenorchestra-cloud-controller-manager-vX.Y.Z-linux-ARCH   the binary, version stamped
//	xenorchestra-cloud-controller-manager-vX.Y.Z.oci.tar      the image: an OCI image layout in a tar archive
//	xenorchestra-cloud-controller-manager-X.Y.Z.tgz           the Helm chart: version X.Y.Z, appVersion vX.Y.Z, image pinned by digest
//	xenorchestra-cloud-controller-manager-vX.Y.Z.yml          the plain manifests (hack/render-manifests.sh of that chart)
//	xenorchestra-cloud-controller-manager-vX.Y.Z.cdx.json     the binary's SBOM (CycloneDX, by cyclonedx-gomod from its module information)
//	RELEASE_NOTES.md                                          CHANGELOG.md's section for the version, the image's digest, how to install
//	SHA256SUMS                                                every file's checksum (sha256sum -c SHA256SUMS)
//
// A release is reproducible: the same source, toolchain and build machine's CA bundle give the
// same files, byte for byte. The binary is built with -trimpath and no build id, the image's
// files and the archives' entries carry a fixed time (test/internal/ociimage), the chart
// archive's entries, which `helm package` stamps with the time of packaging, are rewritten with
// that time too, and the SBOM has neither serial number nor timestamp.
//
// -source releases another checkout, such as an earlier commit extracted with `git archive` (the
// real-node tier builds the previous release that way, to test the upgrade from it).
package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
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
	"go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/util/version"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/test/internal/ociimage"
)

const (
	// binaryName is the controller's command, chart and image name.
	binaryName = "xenorchestra-cloud-controller-manager"
	// modulePath is the controller's module: the version variable is in its cmd/app.
	modulePath = "github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager"
	// checksums is the checksum file's name.
	checksums = "SHA256SUMS"
)

// options are the command's flags.
type options struct {
	version, dist, source, changelog, render, helm, cyclonedx, image, chartRepo, caBundle, arch string
}

func (o *options) addFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.version, "version", "", "the release's version, vMAJOR.MINOR.PATCH or vMAJOR.MINOR.PATCH-PRERELEASE (required)")
	fs.StringVar(&o.dist, "dist", "", "the folder to write the release to, replaced whole; it must be absent, empty or hold an earlier release (required)")
	fs.StringVar(&o.source, "source", "", "the checkout to release (required)")
	fs.StringVar(&o.changelog, "changelog", "", "the changelog the release notes are taken from (default <source>/CHANGELOG.md)")
	fs.StringVar(&o.render, "render-manifests", "", "hack/render-manifests.sh, that renders the plain manifests from the chart (default <source>/hack/render-manifests.sh)")
	fs.StringVar(&o.helm, "helm", "", "the helm binary (hack/testbin.sh helm; required)")
	fs.StringVar(&o.cyclonedx, "cyclonedx-gomod", "", "the cyclonedx-gomod binary (hack/testbin.sh cyclonedx-gomod; required)")
	fs.StringVar(&o.image, "image", "ghcr.io/xenorchestra-k8s/"+binaryName, "the image's repository: the chart's image.repository, tagged with the version")
	fs.StringVar(&o.chartRepo, "chart-repo", "oci://ghcr.io/xenorchestra-k8s/charts", "where the chart is published, for the release notes")
	fs.StringVar(&o.caBundle, "ca-certificates", "/etc/ssl/certs/ca-certificates.crt", "the CA bundle the image carries (Debian's ca-certificates package)")
	fs.StringVar(&o.arch, "arch", runtime.GOARCH, "the architecture (GOARCH) of the binary and the image")
}

// validate returns every error of the options.
func (o *options) validate() error {
	var errs []error
	if o.version == "" {
		errs = append(errs, errors.New("-version is required (vX.Y.Z)"))
	} else if err := checkVersion(o.version); err != nil {
		errs = append(errs, err)
	}
	if o.dist == "" {
		errs = append(errs, errors.New("-dist is required"))
	}
	if o.source == "" {
		errs = append(errs, errors.New("-source is required"))
	} else if _, err := os.Stat(filepath.Join(o.source, "cmd", binaryName)); err != nil {
		errs = append(errs, fmt.Errorf("-source %s is not a checkout of the controller: %w", o.source, err))
	}
	for _, b := range []struct{ flag, path, how string }{
		{"-helm", o.helm, "hack/testbin.sh helm"},
		{"-cyclonedx-gomod", o.cyclonedx, "hack/testbin.sh cyclonedx-gomod"},
	} {
		if b.path == "" {
			errs = append(errs, fmt.Errorf("%s is required (%s builds it)", b.flag, b.how))
		} else if fi, err := os.Stat(b.path); err != nil || fi.IsDir() {
			errs = append(errs, fmt.Errorf("%s %s: not a file (%s builds it)", b.flag, b.path, b.how))
		}
	}
	if _, err := name.NewRepository(o.image); err != nil {
		errs = append(errs, fmt.Errorf("-image: %w", err))
	}
	if o.arch == "" {
		errs = append(errs, errors.New("-arch is empty"))
	}
	return errors.Join(errs...)
}

// checkVersion accepts vMAJOR.MINOR.PATCH with an optional pre-release, and nothing else: no
// build metadata, which an OCI tag cannot carry (+).
func checkVersion(v string) error {
	sv, err := version.ParseSemantic(strings.TrimPrefix(v, "v"))
	if err != nil || !strings.HasPrefix(v, "v") || sv.BuildMetadata() != "" {
		return fmt.Errorf("-version %q: want vMAJOR.MINOR.PATCH, optionally with a pre-release (v0.2.0, v0.2.0-rc.1)", v)
	}
	return nil
}

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

// run builds the release the arguments describe and prints what it wrote on w.
func run(args []string, w io.Writer) error {
	var o options
	fs := flag.NewFlagSet("release", flag.ContinueOnError)
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
	if o.changelog == "" {
		o.changelog = filepath.Join(o.source, "CHANGELOG.md")
	}
	if o.render == "" {
		o.render = filepath.Join(o.source, "hack", "render-manifests.sh")
	}
	b, err := os.ReadFile(o.changelog)
	if err != nil {
		return fmt.Errorf("the release notes: %w", err)
	}
	notes, err := releaseNotes(b, o.version)
	if err != nil {
		return fmt.Errorf("%s: %w", o.changelog, err)
	}
	meta, err := readChartMeta(filepath.Join(o.source, "charts", binaryName, "Chart.yaml"))
	if err != nil {
		return err
	}
	if err := meta.check(o.version); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(filepath.Clean(o.dist)), 0o755); err != nil {
		return err
	}
	if err := checkDist(o.dist); err != nil {
		return err
	}
	// Beside dist, so that the last step is a rename.
	work, err := os.MkdirTemp(filepath.Dir(filepath.Clean(o.dist)), ".release-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(work) }()
	r := &release{options: o, work: work, out: filepath.Join(work, "dist"), kubeVersion: meta.KubeVersion}
	if err := os.Mkdir(r.out, 0o755); err != nil {
		return err
	}
	for _, s := range []struct {
		what string
		do   func() error
	}{
		{"binary", r.buildBinary},
		{"image", r.buildImage},
		{"chart", r.packageChart},
		{"manifests", r.renderManifests},
		{"SBOM", r.writeSBOM},
		{"release notes", func() error { return r.writeNotes(notes) }},
		{"checksums", r.writeChecksums},
	} {
		start := time.Now()
		if err := s.do(); err != nil {
			return fmt.Errorf("%s: %w", s.what, err)
		}
		if _, err := fmt.Fprintf(w, "release: %s done in %s\n", s.what, time.Since(start).Round(time.Millisecond)); err != nil {
			return err
		}
	}
	if err := os.RemoveAll(o.dist); err != nil {
		return err
	}
	if err := os.Rename(r.out, o.dist); err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "release %s in %s: image %s, chart %s\n", o.version, o.dist, r.imageRef, r.chartFile)
	return err
}

// checkDist refuses a dist folder that holds anything but an earlier release (the files its
// SHA256SUMS names), which the release replaces: a wrong -dist must not delete other files.
func checkDist(dist string) error {
	entries, err := os.ReadDir(dist)
	if errors.Is(err, os.ErrNotExist) || err == nil && len(entries) == 0 {
		return nil
	}
	if err != nil {
		return err
	}
	sums, err := os.ReadFile(filepath.Join(dist, checksums))
	listed := map[string]bool{checksums: true}
	for _, line := range strings.Split(string(sums), "\n") {
		if _, file, ok := strings.Cut(line, "  "); ok {
			listed[file] = true
		}
	}
	var others []string
	for _, e := range entries {
		if !listed[e.Name()] {
			others = append(others, e.Name())
		}
	}
	if err != nil || len(others) > 0 {
		return fmt.Errorf("-dist %s holds files that are not a release's (%s): remove them or choose another folder", dist, strings.Join(others, ", "))
	}
	return nil
}

// release is a release being built into out.
type release struct {
	options
	work, out string
	// binary is the binary's path; imageRef the image's name with its digest; chartFile the
	// chart archive's name; kubeVersion the chart's.
	binary, imageRef, digest, chartFile, kubeVersion string
}

// file returns the path in the release of NAME-vX.Y.Z<suffix>.
func (r *release) file(suffix string) string {
	return filepath.Join(r.out, binaryName+"-"+r.version+suffix)
}

// buildBinary builds the controller as `make build` does, and reproducibly: no build id, no
// environment's GOFLAGS.
func (r *release) buildBinary() error {
	r.binary = r.file("-linux-" + r.arch)
	ldflags := "-s -w -buildid= -X " + modulePath + "/cmd/app.version=" + r.version
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", ldflags, "-o", r.binary, "./cmd/"+binaryName)
	cmd.Dir = r.source
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+r.arch, "GOFLAGS=-mod=readonly")
	return runCmd(cmd)
}

// buildImage builds the image (OCI media types) from the binary and writes its OCI layout.
func (r *release) buildImage() error {
	bin, err := os.ReadFile(r.binary)
	if err != nil {
		return err
	}
	ca, err := os.ReadFile(r.caBundle)
	if err != nil || !bytes.Contains(ca, []byte("-----BEGIN CERTIFICATE-----")) {
		return fmt.Errorf("no CA bundle at %s (%v): install Debian's ca-certificates package or pass -ca-certificates", r.caBundle, err)
	}
	img, err := ociimage.Build(ociimage.Spec{
		Entry: binaryName, Binary: bin, CABundle: ca, Arch: r.arch, Version: r.version,
		Source: "https://github.com/xenorchestra-k8s/" + binaryName, OCI: true,
	})
	if err != nil {
		return err
	}
	tag, err := name.NewTag(r.image + ":" + r.version)
	if err != nil {
		return err
	}
	d, err := img.Digest()
	if err != nil {
		return err
	}
	r.digest, r.imageRef = d.String(), tag.String()+"@"+d.String()
	return ociimage.WriteLayout(r.file(".oci.tar"), tag, img)
}

// packageChart packages the source's chart with the release's version and appVersion, its
// image pinned by digest (image.digest in values.yaml), and lints it.
func (r *release) packageChart() error {
	chart := filepath.Join(r.work, "chart", binaryName)
	if err := os.CopyFS(chart, os.DirFS(filepath.Join(r.source, "charts", binaryName))); err != nil {
		return err
	}
	values := filepath.Join(chart, "values.yaml")
	b, err := os.ReadFile(values)
	if err != nil {
		return err
	}
	if b, err = pinDigest(b, r.image, r.digest); err != nil {
		return fmt.Errorf("%s: %w", values, err)
	}
	if err := os.WriteFile(values, b, 0o644); err != nil {
		return err
	}
	chartVersion := strings.TrimPrefix(r.version, "v")
	pkg := filepath.Join(r.work, "package")
	if err := runCmd(exec.Command(r.helm, "package", chart, "--version", chartVersion, "--app-version", r.version, "--destination", pkg)); err != nil {
		return err
	}
	r.chartFile = binaryName + "-" + chartVersion + ".tgz"
	out := filepath.Join(r.out, r.chartFile)
	if err := fixTimes(filepath.Join(pkg, r.chartFile), out); err != nil {
		return err
	}
	return runCmd(exec.Command(r.helm, "lint", "--strict", out))
}

// chartMeta is what the release reads of Chart.yaml.
type chartMeta struct {
	Version     string `yaml:"version"`
	AppVersion  string `yaml:"appVersion"`
	KubeVersion string `yaml:"kubeVersion"`
}

func readChartMeta(path string) (chartMeta, error) {
	var m chartMeta
	b, err := os.ReadFile(path)
	if err != nil {
		return m, err
	}
	if err := yaml.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

// check refuses a final release (no pre-release part) whose Chart.yaml names another version:
// the checkout's chart installs the image of its appVersion, and the docs install the chart of
// its version, so a release bumps them first (docs/release.md). A pre-release is built from any
// checkout.
func (m chartMeta) check(v string) error {
	if strings.Contains(v, "-") || m.Version == strings.TrimPrefix(v, "v") && m.AppVersion == v {
		return nil
	}
	return fmt.Errorf("the chart's Chart.yaml says version %s, appVersion %s: set them to %s and %s for the release %s (docs/release.md)",
		m.Version, m.AppVersion, strings.TrimPrefix(v, "v"), v, v)
}

// pinDigest sets image.digest in a values.yaml to digest, editing only that value so that the
// file's comments and layout stay as written. It refuses a values file whose image.repository
// is not the release's image or whose image.digest is already set.
func pinDigest(values []byte, repo, digest string) ([]byte, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(values, &doc); err != nil {
		return nil, err
	}
	image := mapValue(&doc, "image")
	repoNode, digestNode := mapValue(image, "repository"), mapValue(image, "digest")
	switch {
	case repoNode == nil || digestNode == nil:
		return nil, errors.New("no image.repository or image.digest")
	case repoNode.Value != repo:
		return nil, fmt.Errorf("image.repository is %q, the release's image is %q: pass -image", repoNode.Value, repo)
	case digestNode.Value != "" || digestNode.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) == 0:
		return nil, fmt.Errorf("image.digest is %q: want an empty quoted string to pin", digestNode.Value)
	}
	lines := strings.SplitAfter(string(values), "\n")
	line, col := lines[digestNode.Line-1], digestNode.Column-1
	if len(line) < col+2 {
		return nil, fmt.Errorf("line %d: no value at column %d", digestNode.Line, digestNode.Column)
	}
	lines[digestNode.Line-1] = line[:col] + `"` + digest + `"` + line[col+2:]
	return []byte(strings.Join(lines, "")), nil
}

// mapValue returns the value of key in the mapping n (or the document n holds), nil if none.
func mapValue(n *yaml.Node, key string) *yaml.Node {
	if n != nil && n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
		n = n.Content[0]
	}
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

// fixTimes copies the gzipped tar archive in to out with every entry's time set to
// ociimage.Epoch: `helm package` stamps each with the time of packaging (chartutil.Save), the
// only part of the chart archive that changes from one packaging to the next.
func fixTimes(in, out string) error {
	f, err := os.Open(in)
	if err != nil {
		return err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return err
	}
	var b bytes.Buffer
	zw, err := gzip.NewWriterLevel(&b, gzip.BestCompression)
	if err != nil {
		return err
	}
	zw.Header = zr.Header
	zw.ModTime = time.Time{}
	tr, tw := tar.NewReader(zr), tar.NewWriter(zw)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		h.ModTime, h.AccessTime, h.ChangeTime = ociimage.Epoch, time.Time{}, time.Time{}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if _, err := io.Copy(tw, tr); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	return os.WriteFile(out, b.Bytes(), 0o644)
}

// renderManifests renders the plain manifests from the packaged chart.
func (r *release) renderManifests() error {
	cmd := exec.Command("bash", r.render, r.file(".yml"))
	cmd.Env = append(os.Environ(), "HELM="+r.helm, "CHART="+filepath.Join(r.out, r.chartFile))
	return runCmd(cmd)
}

// writeSBOM writes the binary's SBOM: every module it was built from (the Go standard library
// too), with versions, package URLs and hashes, as cyclonedx-gomod reads them from the binary;
// no serial number or timestamp, which would change every time.
func (r *release) writeSBOM() error {
	return runCmd(exec.Command(r.cyclonedx, "bin", "-json", "-std", "-noserial", "-notimestamp",
		"-version", r.version, "-output", r.file(".cdx.json"), r.binary))
}

// writeNotes writes RELEASE_NOTES.md: the changelog's section, then the artifacts and how to
// install them.
func (r *release) writeNotes(notes string) error {
	chartVersion := strings.TrimPrefix(r.version, "v")
	var b strings.Builder
	fmt.Fprintf(&b, "# %s %s\n\n%s\n\n## Install\n\n", binaryName, r.version, notes)
	fmt.Fprintf(&b, "Kubernetes %s (the chart's `kubeVersion`). The chart from the OCI registry (Helm 3.8 or later):\n\n", r.kubeVersion)
	fmt.Fprintf(&b, "```sh\nhelm upgrade -i %s %s/%s --version %s \\\n  -n kube-system -f values.yaml\n```\n\n", binaryName, r.chartRepo, binaryName, chartVersion)
	fmt.Fprintf(&b, "It deploys the image by digest: `%s`.\nOr apply the plain manifests, `%s` (docs/install.md, \"Install with kubectl\").\n\n", r.imageRef, filepath.Base(r.file(".yml")))
	b.WriteString("## Files\n\n| file | what |\n| --- | --- |\n")
	for _, f := range []struct{ file, what string }{
		{filepath.Base(r.binary), "the binary (static, linux/" + r.arch + ")"},
		{filepath.Base(r.file(".oci.tar")), "the image, an OCI image layout in a tar archive (`skopeo copy oci-archive:FILE docker://…`, or `crane push` of the extracted folder)"},
		{r.chartFile, "the Helm chart (`helm push FILE oci://…`)"},
		{filepath.Base(r.file(".yml")), "the plain manifests, for `kubectl apply -f`"},
		{filepath.Base(r.file(".cdx.json")), "the binary's SBOM, CycloneDX JSON"},
		{checksums, "SHA-256 of every file (`sha256sum -c " + checksums + "`)"},
	} {
		fmt.Fprintf(&b, "| `%s` | %s |\n", f.file, f.what)
	}
	return os.WriteFile(filepath.Join(r.out, "RELEASE_NOTES.md"), []byte(b.String()), 0o644)
}

// writeChecksums writes SHA256SUMS over every file of the release, in sha256sum's format.
func (r *release) writeChecksums() error {
	entries, err := os.ReadDir(r.out)
	if err != nil {
		return err
	}
	var b strings.Builder
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(r.out, e.Name()))
		if err != nil {
			return err
		}
		sum := sha256.Sum256(data)
		fmt.Fprintf(&b, "%s  %s\n", hex.EncodeToString(sum[:]), e.Name())
	}
	return os.WriteFile(filepath.Join(r.out, checksums), []byte(b.String()), 0o644)
}

// runCmd runs cmd and returns its output in the error when it fails.
func runCmd(cmd *exec.Cmd) error {
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w\n%s", strings.Join(cmd.Args, " "), err, out)
	}
	return nil
}

// releaseNotes returns the body of the changelog's section for version, "## [X.Y.Z]" (Keep a
// Changelog, https://keepachangelog.com/en/1.1.0/), up to the next section or the link
// definitions; a pre-release (X.Y.Z-rc.1) without a section of its own takes "## [Unreleased]".
// (The libraries that parse this format are small and little used: a section is a few lines.)
func releaseNotes(changelog []byte, v string) (string, error) {
	want := strings.TrimPrefix(v, "v")
	sections := changelogSections(string(changelog))
	body, ok := sections[want]
	if !ok && strings.Contains(want, "-") {
		body, ok = sections["Unreleased"]
	}
	switch {
	case !ok:
		return "", fmt.Errorf("no section \"## [%s]\": move [Unreleased]'s entries under \"## [%s] - %s\"", want, want, time.Now().UTC().Format(time.DateOnly))
	case body == "":
		return "", fmt.Errorf("the section of %s is empty", want)
	}
	return body, nil
}

// changelogSections returns the body of each "## [NAME]" section of a changelog by NAME.
func changelogSections(s string) map[string]string {
	sections := map[string]string{}
	var current string
	var body []string
	flush := func() {
		if current != "" {
			sections[current] = strings.TrimSpace(strings.Join(body, "\n"))
		}
		current, body = "", nil
	}
	for _, line := range strings.Split(s, "\n") {
		switch {
		case strings.HasPrefix(line, "## "):
			flush()
			if open, rest, ok := strings.Cut(strings.TrimPrefix(line, "## "), "["); ok && open == "" {
				current, _, _ = strings.Cut(rest, "]")
			}
		case strings.HasPrefix(line, "[") && strings.Contains(line, "]: "):
			// The link definitions end the last section.
			flush()
		case current != "":
			body = append(body, line)
		}
	}
	flush()
	return sections
}
