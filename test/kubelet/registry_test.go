package kubelet_test

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/internal/testenv"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/test/internal/ociimage"
)

// The cluster installs the controller as its users do: from an OCI registry. A real CNCF
// registry (distribution's, built by hack/testbin.sh) serves on 127.0.0.1; the release built by
// `make release` is published to it as a maintainer publishes one (the image with crane, the
// chart with helm push), and containerd pulls every image from it by digest (containerd 1.6
// pulls from a loopback registry over plain HTTP with no configuration): nothing is imported.

const (
	// chartName is the chart's, the image's and the binary's name.
	chartName = "xenorchestra-cloud-controller-manager"
	// releaseVersion is the version this checkout is released as here.
	releaseVersion = "v0.2.0-rc.1"
	// previousVersion and previousCommit are the previous release, which the upgrade starts
	// from (CHANGELOG.md): built from that commit of this repository, as make release builds a
	// release from a tag. Update both when a release is made.
	previousVersion = "v0.1.0"
	previousCommit  = "bd50ba4a686ea7b75e289a7f3d936ad7c3210606"
	// testChangelog is the changelog of the releases built here: their notes are not what this
	// tier tests (test/release does), and CHANGELOG.md's [Unreleased] may be empty.
	testChangelog = "# Changelog\n\n## [Unreleased]\n\n- Built by test/kubelet.\n\n## [0.1.0] - 2026-11-28\n\n- Built by test/kubelet.\n"
)

// published is a release in the cluster's registry.
type published struct {
	version string
	// chartVersion is the chart's version: the version without its v.
	chartVersion string
	// image is the image's repository in the registry; digest its digest.
	image, digest string
	// dist is the release's folder (make release's DIST).
	dist string
}

// imageRef is the image by digest, as the chart deploys it from the registry.
func (p published) imageRef() string { return p.image + "@" + p.digest }

// startRegistry runs the CNCF registry on a free loopback port, its storage in the cluster's
// folder, and waits until it answers.
func (c *realCluster) startRegistry(t *testing.T) {
	t.Helper()
	addr := testenv.FreeAddr(t)
	config := fmt.Sprintf("version: 0.1\nlog:\n  level: info\nstorage:\n  filesystem:\n    rootdirectory: %s\n  delete:\n    enabled: true\nhttp:\n  addr: %s\n", c.path("registry"), addr)
	if err := os.WriteFile(c.path("registry.yaml"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startProcess(t, "registry", filepath.Join(c.assets, "registry"), c.path("registry.log"), "serve", c.path("registry.yaml"))
	waitHTTP(t, p, "http://"+addr+"/v2/", nil)
	c.registry = addr
}

// chartRef is where the chart is in the registry.
func (c *realCluster) chartRef() string { return "oci://" + c.registry + "/charts/" + chartName }

// buildRelease runs `make release VERSION=version` of the checkout source into a folder of the
// cluster's and returns that folder.
func (c *realCluster) buildRelease(t *testing.T, version, source string) string {
	t.Helper()
	changelog := c.path("CHANGELOG.md")
	if err := os.WriteFile(changelog, []byte(testChangelog), 0o600); err != nil {
		t.Fatal(err)
	}
	dist := c.path("dist-" + version)
	start := time.Now()
	cmd := exec.Command("make", "-s", "release", "VERSION="+version, "DIST="+dist, "SOURCE="+source, "CHANGELOG="+changelog)
	cmd.Dir = testenv.RepoRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make release VERSION=%s SOURCE=%s: %v\n%s", version, source, err, out)
	}
	t.Logf("make release VERSION=%s: %s", version, time.Since(start).Round(time.Millisecond))
	return dist
}

// publish pushes the release in dist to the registry as a maintainer does: the image (its OCI
// layout) with crane, the chart with helm push.
func (c *realCluster) publish(t *testing.T, version, dist string) published {
	t.Helper()
	p := published{version: version, chartVersion: strings.TrimPrefix(version, "v"), image: c.registry + "/" + chartName, dist: dist}
	p.digest = c.pushLayout(t, filepath.Join(dist, chartName+"-"+version+".oci.tar"), p.image+":"+version)
	c.helm(t, "push", filepath.Join(dist, chartName+"-"+p.chartVersion+".tgz"), "oci://"+c.registry+"/charts", "--plain-http")
	// The chart pins the image that was pushed.
	if v := c.helm(t, "show", "values", c.chartRef(), "--version", p.chartVersion, "--plain-http"); !strings.Contains(v, `digest: "`+p.digest+`"`) {
		t.Fatalf("the chart %s in the registry does not pin the image's digest %s:\n%s", p.chartVersion, p.digest, v)
	}
	return p
}

// pushLayout extracts an OCI layout archive, pushes it to ref with crane and returns the
// digest crane reports.
func (c *realCluster) pushLayout(t *testing.T, archive, ref string) string {
	t.Helper()
	dir, err := os.MkdirTemp(c.dir, "layout-")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = os.RemoveAll(dir) }()
	if err := untarFile(archive, dir); err != nil {
		t.Fatalf("extract %s: %v", archive, err)
	}
	out, err := exec.Command(filepath.Join(c.assets, "crane"), "push", dir, ref).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			err = fmt.Errorf("%w: %s", err, ee.Stderr)
		}
		t.Fatalf("crane push %s %s: %v", archive, ref, err)
	}
	// crane prints REPOSITORY@DIGEST.
	_, digest, ok := strings.Cut(strings.TrimSpace(string(out)), "@")
	if !ok {
		t.Fatalf("crane push printed %q, want the pushed reference by digest", out)
	}
	return digest
}

// publishPause builds the sandbox image (test/image -pause) as an OCI layout, pushes it and
// returns it by digest, for containerd's sandbox_image.
func (c *realCluster) publishPause(t *testing.T) string {
	t.Helper()
	archive := c.path("pause.oci.tar")
	cmd := exec.Command("go", "-C", "test", "run", "./image", "-pause", "-tag", c.registry+"/xoccm-test/pause:1", "-oci", archive)
	cmd.Dir = testenv.RepoRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the pause image: %v\n%s", err, out)
	}
	return c.registry + "/xoccm-test/pause@" + c.pushLayout(t, archive, c.registry+"/xoccm-test/pause:1")
}

// previousSource extracts the previous release's commit of this repository into a folder and
// returns it. CI checks out a full clone, which holds the commit; a shallow clone fetches it
// from its origin.
func (c *realCluster) previousSource(t *testing.T) string {
	t.Helper()
	root := testenv.RepoRoot()
	git := func(args ...string) ([]byte, error) {
		cmd := exec.Command("git", append([]string{"-C", root}, args...)...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return out, fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, stderr.String())
		}
		return out, nil
	}
	if _, err := git("cat-file", "-e", previousCommit+"^{commit}"); err != nil {
		if _, ferr := git("fetch", "--depth=1", "origin", previousCommit); ferr != nil {
			t.Fatalf("the previous release's commit %s is not in this clone (%v), and fetching it failed: %v", previousCommit, err, ferr)
		}
	}
	dir := c.path("previous-release")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	archive := c.path("previous-release.tar")
	if _, err := git("archive", "--output", archive, previousCommit); err != nil {
		t.Fatal(err)
	}
	if err := untarFile(archive, dir); err != nil {
		t.Fatalf("extract %s: %v", archive, err)
	}
	return dir
}

// untarFile extracts the tar archive in the file archive into dir.
func untarFile(archive, dir string) error {
	f, err := os.Open(archive)
	if err != nil {
		return err
	}
	defer f.Close()
	return ociimage.Untar(f, dir)
}

// checkPulled checks that the Pods run the release's image by digest, and that containerd
// pulled it from the registry: the Pods' image and imageID, containerd's image store, the
// registry's log.
func (c *realCluster) checkPulled(t *testing.T, pods []corev1.Pod, p published) {
	t.Helper()
	if len(pods) == 0 {
		t.Fatal("no Pod")
	}
	for _, pod := range pods {
		if got := pod.Spec.Containers[0].Image; got != p.imageRef() {
			t.Errorf("Pod %s runs %s, want the release's image by digest %s", pod.Name, got, p.imageRef())
		}
		if st := pod.Status.ContainerStatuses; len(st) == 0 || !strings.HasSuffix(st[0].ImageID, "@"+p.digest) {
			t.Errorf("Pod %s: container statuses %+v, want the imageID %s", pod.Name, st, p.digest)
		}
	}
	images, err := c.ctr("images", "ls", "-q")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(strings.Fields(images), p.imageRef()) {
		t.Errorf("containerd holds %q, not %s", strings.Fields(images), p.imageRef())
	}
	if !c.registryServed(p.image, p.digest) {
		t.Errorf("the registry's log shows no pull of %s by digest:\n%s", p.imageRef(), tail(c.path("registry.log"), 20))
	}
	t.Logf("Pods %s run %s, pulled by containerd from the registry", podNames(pods), p.imageRef())
}

// registryServed reports whether the registry's log shows a GET of the manifest of image by
// digest: what containerd sends when it pulls a reference by digest.
func (c *realCluster) registryServed(image, digest string) bool {
	repo := strings.TrimPrefix(image, c.registry+"/")
	b, err := os.ReadFile(c.path("registry.log"))
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.Contains(line, "GET /v2/"+repo+"/manifests/"+digest) && strings.Contains(line, fmt.Sprint(http.StatusOK)) {
			return true
		}
	}
	return false
}
