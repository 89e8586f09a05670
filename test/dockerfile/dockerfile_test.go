// Package dockerfile checks the Dockerfile, which Docker cannot build here, and the image
// test/image builds without Docker against it. It lives in the test module (test/go.mod):
// BuildKit's parser and the shell parser it uses are no dependencies of the controller's module.
package dockerfile

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/buildkit/frontend/dockerfile/linter"
	"github.com/moby/buildkit/frontend/dockerfile/parser"
	"github.com/moby/buildkit/frontend/dockerfile/shell"
	"github.com/moby/patternmatcher"
	"github.com/moby/patternmatcher/ignorefile"
	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/syntax"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/internal/testenv"
)

// repoRoot is the repository's root folder.
var repoRoot = testenv.RepoRoot()

// Docker cannot run here, so the Dockerfile is read with BuildKit's own parser and checked: its
// structure, a lint (BuildKit's parse-time checks and the hadolint rules that apply to it;
// hadolint itself is not packaged for Debian), and its build command against `make -n build`,
// argument for argument; the image `make image` builds without Docker is checked against it too.

// The values both builds are compared with: the version is a build input, the output folder
// only a location.
const (
	testVersion = "v9.9.9-test"
	testBin     = "/OUT"
)

// dockerfile is the repository's Dockerfile as BuildKit reads it.
type dockerfile struct {
	ast    *parser.Node
	escape rune
	global []instructions.ArgCommand
	stages []instructions.Stage
	// warnings are BuildKit's parser and lint warnings.
	warnings []string
}

func readDockerfile(t *testing.T) dockerfile {
	t.Helper()
	f, err := os.Open(filepath.Join(repoRoot, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	res, err := parser.Parse(f)
	if err != nil {
		t.Fatalf("Dockerfile: %v", err)
	}
	df := dockerfile{ast: res.AST, escape: res.EscapeToken}
	for _, w := range res.Warnings {
		df.warnings = append(df.warnings, w.Short)
	}
	lint := linter.New(&linter.Config{Warn: func(rule, _, _, msg string, loc []parser.Range) {
		df.warnings = append(df.warnings, fmt.Sprintf("line %d: %s (%s)", loc[0].Start.Line, msg, rule))
	}})
	if df.stages, df.global, err = instructions.Parse(res.AST, lint); err != nil {
		t.Fatalf("Dockerfile: %v", err)
	}
	if len(df.stages) < 2 {
		t.Fatalf("Dockerfile has %d stages, want a builder and a runtime stage", len(df.stages))
	}
	return df
}

// args evaluates the ARGs of a stage before its command upTo as docker build does, with
// overrides given as --build-arg values. A default that names an unset variable is an error.
func (df dockerfile) args(t *testing.T, st instructions.Stage, upTo int, overrides map[string]string) map[string]string {
	t.Helper()
	lex := shell.NewLex(df.escape)
	eval := func(a instructions.ArgCommand, vars, outer map[string]string) {
		for _, kv := range a.Args {
			v, ok := overrides[kv.Key]
			switch {
			case ok:
			case kv.Value != nil:
				res, err := lex.ProcessWordWithMatches(*kv.Value, shell.EnvsFromSlice(envList(vars)))
				if err != nil || len(res.Unmatched) > 0 {
					t.Fatalf("line %d: ARG %s=%s: %v (unset: %v)", a.Location()[0].Start.Line, kv.Key, *kv.Value, err, res.Unmatched)
				}
				v = res.Result
			default:
				if v, ok = outer[kv.Key]; !ok {
					continue
				}
			}
			vars[kv.Key] = v
		}
	}
	global, vars := map[string]string{}, map[string]string{}
	for _, a := range df.global {
		eval(a, global, nil)
	}
	for _, c := range st.Commands[:upTo] {
		if a, ok := c.(*instructions.ArgCommand); ok {
			eval(*a, vars, global)
		}
	}
	return vars
}

// envList returns vars as sorted NAME=value pairs.
func envList(vars map[string]string) []string {
	var env []string
	for k, v := range vars {
		env = append(env, k+"="+v)
	}
	slices.Sort(env)
	return env
}

// find returns the first command of a stage of type C that match accepts (any if match is
// nil), and its index; -1 if there is none.
func find[C instructions.Command](st instructions.Stage, match func(C) bool) (int, C) {
	for i, c := range st.Commands {
		if x, ok := c.(C); ok && (match == nil || match(x)) {
			return i, x
		}
	}
	var zero C
	return -1, zero
}

func line(c instructions.Command) int { return c.Location()[0].Start.Line }

// runLine returns the command line of a RUN in shell form.
func runLine(t *testing.T, r *instructions.RunCommand) string {
	t.Helper()
	if !r.PrependShell || len(r.CmdLine) != 1 {
		t.Fatalf("line %d: RUN %q is not in shell form", line(r), r.CmdLine)
	}
	return r.CmdLine[0]
}

// simpleCommand parses a shell command line, expands it with vars as the shell would (an unset
// variable is an error) and returns its words, leading assignments first. Anything but one
// simple command is an error: the build stays one plain command, the same in the Makefile and
// the Dockerfile.
func simpleCommand(line string, vars map[string]string) ([]string, error) {
	f, err := syntax.NewParser().Parse(strings.NewReader(line), "")
	if err != nil {
		return nil, fmt.Errorf("parse %q: %w", line, err)
	}
	var call *syntax.CallExpr
	if len(f.Stmts) == 1 && !f.Stmts[0].Negated && !f.Stmts[0].Background && len(f.Stmts[0].Redirs) == 0 {
		call, _ = f.Stmts[0].Cmd.(*syntax.CallExpr)
	}
	if call == nil {
		return nil, fmt.Errorf("%q is not one simple command", line)
	}
	cfg := &expand.Config{Env: expand.ListEnviron(envList(vars)...), NoUnset: true}
	var words []string
	for _, a := range call.Assigns {
		v, err := expand.Literal(cfg, a.Value)
		if err != nil {
			return nil, fmt.Errorf("expand %q: %w", line, err)
		}
		words = append(words, a.Name.Value+"="+v)
	}
	args, err := expand.Fields(cfg, call.Args...)
	if err != nil {
		return nil, fmt.Errorf("expand %q: %w", line, err)
	}
	return append(words, args...), nil
}

// makeCommands returns the words of each command `make target` runs with testVersion, testBin
// and the variables vars (NAME=value).
func makeCommands(t *testing.T, target string, vars ...string) [][]string {
	t.Helper()
	cmd := exec.Command("make", append([]string{"--no-print-directory", "-n", target, "VERSION=" + testVersion, "BIN=" + testBin}, vars...)...)
	cmd.Dir, cmd.Env = repoRoot, append(os.Environ(), "MAKEFLAGS=")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("make -n %s: %v", target, err)
	}
	var cmds [][]string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		words, err := simpleCommand(l, nil)
		if err != nil {
			t.Fatalf("make %s: %v", target, err)
		}
		cmds = append(cmds, words)
	}
	return cmds
}

// makeBuildCommand returns the words of the command `make build` runs with testVersion and
// testBin.
func makeBuildCommand(t *testing.T) []string {
	t.Helper()
	cmds := makeCommands(t, "build")
	if len(cmds) != 1 {
		t.Fatalf("make build runs %d commands, want 1 (the Dockerfile mirrors it): %q", len(cmds), cmds)
	}
	return cmds[0]
}

// valueAt returns the index of the word after flag in words (its value), or -1.
func valueAt(words []string, flag string) int {
	if i := slices.Index(words, flag); i >= 0 && i+1 < len(words) {
		return i + 1
	}
	return -1
}

func TestDockerfileBuildMatchesMakefile(t *testing.T) {
	df := readDockerfile(t)
	builder, final := df.stages[0], df.stages[len(df.stages)-1]

	if !regexp.MustCompile(`^golang:1\.26(\.\d+)?(-[a-z0-9.]+)?(@sha256:[a-f0-9]{64})?$`).MatchString(builder.BaseName) {
		t.Errorf("builder image %s, want golang:1.26 (the go.mod toolchain)", builder.BaseName)
	}

	// go.mod and go.sum alone, then go mod download, then the source: the module layer is
	// reused until the dependencies change.
	copyMod, _ := find(builder, func(c *instructions.CopyCommand) bool {
		return slices.Equal(slices.Sorted(slices.Values(c.SourcePaths)), []string{"go.mod", "go.sum"})
	})
	download, _ := find(builder, func(c *instructions.RunCommand) bool { return strings.Contains(c.String(), "go mod download") })
	copySrc, _ := find(builder, func(c *instructions.CopyCommand) bool { return slices.Equal(c.SourcePaths, []string{"."}) })
	build, run := find(builder, func(c *instructions.RunCommand) bool { return strings.Contains(c.String(), "go build") })
	if copyMod < 0 || download < 0 || copySrc < 0 || build < 0 || copyMod >= download || download >= copySrc || copySrc >= build {
		t.Fatalf("builder steps COPY go.mod go.sum (%d), RUN go mod download (%d), COPY . (%d), RUN go build (%d): want them present and in this order", copyMod, download, copySrc, build)
	}

	// The build command, as the shell runs it with --build-arg VERSION and BIN, equals the
	// Makefile's, argument for argument.
	vars := df.args(t, builder, build, map[string]string{"VERSION": testVersion, "BIN": testBin})
	if _, ok := vars["VERSION"]; !ok {
		t.Fatal("builder stage has no ARG VERSION: the image would not be version-stamped")
	}
	got, err := simpleCommand(runLine(t, run), vars)
	if err != nil {
		t.Fatalf("line %d: %v", line(run), err)
	}
	if want := makeBuildCommand(t); !slices.Equal(got, want) {
		t.Errorf("Dockerfile build command differs from `make build`:\n docker: %q\n   make: %q", got, want)
	}
	if !slices.Contains(got, "CGO_ENABLED=0") || !slices.Contains(got, "-trimpath") {
		t.Errorf("build %q lacks CGO_ENABLED=0 or -trimpath", got)
	}
	if !slices.ContainsFunc(got, func(w string) bool { return strings.Contains(w, "/cmd/app.version="+testVersion) }) {
		t.Errorf("build %q does not stamp the version", got)
	}

	// The runtime stage copies exactly the binary the build wrote (default ARGs) and runs it.
	out, err := simpleCommand(runLine(t, run), df.args(t, builder, build, nil))
	if err != nil {
		t.Fatal(err)
	}
	o := slices.Index(out, "-o")
	if o < 0 || o+1 == len(out) {
		t.Fatalf("build %q has no -o", out)
	}
	cp, cpy := find(final, func(c *instructions.CopyCommand) bool { return c.From == builder.Name })
	if cp < 0 || !slices.Equal(cpy.SourcePaths, []string{out[o+1]}) {
		t.Fatalf("runtime stage does not COPY --from=%s %s", builder.Name, out[o+1])
	}
	if ep, entry := find[*instructions.EntrypointCommand](final, nil); ep < 0 || entry.PrependShell || len(entry.CmdLine) == 0 || entry.CmdLine[0] != cpy.DestPath {
		t.Errorf("ENTRYPOINT is not [%q] in JSON form", cpy.DestPath)
	}
}

// TestDockerfileMatchesImageRecipe checks that `make image`, which builds without Docker, makes
// the image the Dockerfile describes where the two compare: it runs the build command of `make
// build` (so the Dockerfile's), puts that binary where the Dockerfile copies it, and runs it with
// the same USER and ENTRYPOINT. The recipe's image command is run on a stand-in binary and its
// archive read back.
func TestDockerfileMatchesImageRecipe(t *testing.T) {
	df := readDockerfile(t)
	builder, final := df.stages[0], df.stages[len(df.stages)-1]

	dir := t.TempDir()
	out := filepath.Join(dir, "image.tar")
	cmds := makeCommands(t, "image", "IMAGE_TAR="+out)
	if len(cmds) != 2 {
		t.Fatalf("make image runs %d commands, want 2 (the build, then test/image): %q", len(cmds), cmds)
	}
	build, image := cmds[0], cmds[1]

	// The same build command as the Dockerfile's, with the same --build-arg VERSION and BIN.
	b, run := find(builder, func(c *instructions.RunCommand) bool { return strings.Contains(c.String(), "go build") })
	if b < 0 {
		t.Fatal("the builder stage has no RUN go build")
	}
	docker, err := simpleCommand(runLine(t, run), df.args(t, builder, b, map[string]string{"VERSION": testVersion, "BIN": testBin}))
	if err != nil {
		t.Fatalf("line %d: %v", line(run), err)
	}
	if !slices.Equal(build, docker) {
		t.Errorf("make image builds with a command other than the Dockerfile's:\n docker: %q\n   make: %q", docker, build)
	}

	// The image command takes the binary the build wrote.
	o, bin, tagAt, outAt := valueAt(build, "-o"), valueAt(image, "-binary"), valueAt(image, "-tag"), valueAt(image, "-o")
	if o < 0 || bin < 0 || tagAt < 0 || outAt < 0 {
		t.Fatalf("make image: want the build's -o and the image command's -binary, -tag and -o: %q", cmds)
	}
	if image[bin] != build[o] {
		t.Errorf("make image puts %s in the image, want the build's output %s", image[bin], build[o])
	}
	if image[outAt] != out {
		t.Errorf("make image writes %s, want IMAGE_TAR (%s)", image[outAt], out)
	}

	// Run it on a stand-in for the binary and read the image back.
	fake := []byte("stand-in for the controller binary\n")
	image[bin] = filepath.Join(dir, "binary")
	if err := os.WriteFile(image[bin], fake, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(image[0], image[1:]...)
	cmd.Dir = repoRoot
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%q: %v\n%s", image, err, msg)
	}
	tag, err := name.NewTag(image[tagAt])
	if err != nil {
		t.Fatal(err)
	}
	img, err := tarball.ImageFromPath(out, &tag)
	if err != nil {
		t.Fatalf("read %s back as %s: %v", out, tag, err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}

	if u, user := find[*instructions.UserCommand](final, nil); u < 0 || cf.Config.User != user.User {
		t.Errorf("make image runs as user %q, the Dockerfile with %v", cf.Config.User, user)
	}
	ep, entry := find[*instructions.EntrypointCommand](final, nil)
	if ep < 0 || !slices.Equal(cf.Config.Entrypoint, entry.CmdLine) {
		t.Fatalf("make image's entrypoint %q differs from the Dockerfile's %v", cf.Config.Entrypoint, entry)
	}
	if v := cf.Config.Labels["org.opencontainers.image.version"]; v != testVersion {
		t.Errorf("make image's version label %q, want %s", v, testVersion)
	}
	cp, cpy := find(final, func(c *instructions.CopyCommand) bool { return c.From == builder.Name })
	if cp < 0 {
		t.Fatalf("the runtime stage has no COPY --from=%s", builder.Name)
	}
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			t.Fatalf("make image has no %s, where the Dockerfile copies the binary", cpy.DestPath)
		}
		if err != nil {
			t.Fatal(err)
		}
		if "/"+strings.TrimPrefix(h.Name, "./") != cpy.DestPath {
			continue
		}
		if got, err := io.ReadAll(tr); err != nil || !bytes.Equal(got, fake) {
			t.Errorf("%s in make image's image is not the binary given: %v", cpy.DestPath, err)
		}
		if h.Mode&0o111 == 0 {
			t.Errorf("%s in make image's image has mode %o: not executable", cpy.DestPath, h.Mode)
		}
		return
	}
}

// TestDockerfileBuildStepsRun runs the builder stage's RUN steps with sh -c, as docker would
// with --build-arg VERSION, writing the binary to a temporary folder: the result must be a
// static executable that reports the stamped version.
func TestDockerfileBuildStepsRun(t *testing.T) {
	df := readDockerfile(t)
	builder := df.stages[0]
	for i, c := range builder.Commands {
		run, ok := c.(*instructions.RunCommand)
		if !ok {
			continue
		}
		vars := df.args(t, builder, i, map[string]string{"VERSION": testVersion, "BIN": t.TempDir()})
		cmd := exec.Command("/bin/sh", "-c", runLine(t, run))
		cmd.Dir, cmd.Env = repoRoot, append(os.Environ(), envList(vars)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("line %d: %s: %v\n%s", line(run), run, err, out)
		}
		argv, err := simpleCommand(runLine(t, run), vars)
		o := slices.Index(argv, "-o")
		if err != nil || o < 0 || o+1 == len(argv) {
			continue
		}
		bin := argv[o+1]
		f, err := elf.Open(bin)
		if err != nil {
			t.Fatalf("built %s: %v", bin, err)
		}
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP {
				t.Errorf("%s is dynamically linked: it would not run on distroless static", bin)
			}
		}
		_ = f.Close()
		out, err := exec.Command(bin, "-version").CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != testVersion {
			t.Errorf("%s -version = %q, %v; want %s", bin, out, err, testVersion)
		}
		return
	}
	t.Fatal("no RUN step of the builder stage writes a binary with -o")
}

func TestDockerfileRuntimeStage(t *testing.T) {
	df := readDockerfile(t)
	final := df.stages[len(df.stages)-1]
	if !regexp.MustCompile(`^gcr\.io/distroless/static-debian1[2-9]:nonroot(@sha256:[a-f0-9]{64})?$`).MatchString(final.BaseName) {
		t.Errorf("runtime image %s, want gcr.io/distroless/static-debian12:nonroot", final.BaseName)
	}
	if u, user := find[*instructions.UserCommand](final, nil); u < 0 || !slices.Contains([]string{"65532", "65532:65532"}, user.User) {
		t.Errorf("runtime stage USER is not 65532 (the chart's runAsUser)")
	}
	if r, run := find[*instructions.RunCommand](final, nil); r >= 0 {
		t.Errorf("line %d: RUN in the runtime stage: distroless has no shell", line(run))
	}
}

// TestDockerfileLint reports BuildKit's parse-time warnings and applies the hadolint rules that
// bear on this Dockerfile.
func TestDockerfileLint(t *testing.T) {
	df := readDockerfile(t)
	for _, w := range df.warnings {
		t.Error(w)
	}
	for _, n := range df.ast.Children {
		if kw := strings.Fields(n.Original)[0]; kw != strings.ToUpper(kw) {
			t.Errorf("line %d: instruction %s not in upper case", n.StartLine, kw)
		}
	}
	names := map[string]bool{}
	for _, st := range df.stages {
		if !names[st.BaseName] {
			ref, _, hasDigest := strings.Cut(st.BaseName, "@")
			_, tag, hasTag := strings.Cut(path.Base(ref), ":")
			if !hasTag && !hasDigest {
				t.Errorf("FROM %s without a tag (DL3006)", st.BaseName)
			} else if tag == "latest" {
				t.Errorf("FROM %s uses latest (DL3007)", st.BaseName)
			}
		}
		if st.Name != "" {
			if names[st.Name] {
				t.Errorf("stage name %s reused (DL3024)", st.Name)
			}
			names[st.Name] = true
		}
		for _, c := range st.Commands {
			switch c := c.(type) {
			case *instructions.AddCommand:
				t.Errorf("line %d: ADD instead of COPY (DL3020)", line(c))
			case *instructions.WorkdirCommand:
				if !path.IsAbs(c.Path) && !strings.HasPrefix(c.Path, "$") {
					t.Errorf("line %d: relative WORKDIR %s (DL3000)", line(c), c.Path)
				}
			case *instructions.CmdCommand:
				if c.PrependShell {
					t.Errorf("line %d: CMD in shell form (DL3025)", line(c))
				}
			case *instructions.EntrypointCommand:
				if c.PrependShell {
					t.Errorf("line %d: ENTRYPOINT in shell form (DL3025)", line(c))
				}
			case *instructions.CopyCommand:
				if c.From != "" && !names[c.From] {
					t.Errorf("line %d: COPY --from=%s names no earlier stage (DL3022)", line(c), c.From)
				}
			case *instructions.RunCommand:
				f, err := syntax.NewParser().Parse(strings.NewReader(runLine(t, c)), "")
				if err != nil {
					t.Errorf("line %d: %v", line(c), err)
					continue
				}
				syntax.Walk(f, func(n syntax.Node) bool {
					if call, ok := n.(*syntax.CallExpr); ok && len(call.Args) > 0 {
						switch call.Args[0].Lit() {
						case "cd":
							t.Errorf("line %d: cd in RUN; use WORKDIR (DL3003)", line(c))
						case "sudo":
							t.Errorf("line %d: sudo in RUN (DL3004)", line(c))
						}
					}
					return true
				})
			}
		}
	}
	final := df.stages[len(df.stages)-1]
	if u, user := find[*instructions.UserCommand](final, nil); u < 0 || strings.HasPrefix(user.User, "root") || strings.HasPrefix(user.User, "0") {
		t.Error("the image runs as root (DL3002)")
	}
}

// TestDockerignore checks, with the pattern matcher docker uses, that the build context keeps
// every file `go build` of the binary needs and leaves out VCS data, build outputs and tests.
func TestDockerignore(t *testing.T) {
	f, err := os.Open(filepath.Join(repoRoot, ".dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	patterns, err := ignorefile.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	pm, err := patternmatcher.New(patterns)
	if err != nil {
		t.Fatal(err)
	}
	excluded := func(p string) bool {
		ok, err := pm.MatchesOrParentMatches(p)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	for _, p := range []string{".git/config", "bin/xenorchestra-cloud-controller-manager", "config/load_test.go", "config/testdata/example.yaml"} {
		if !excluded(p) {
			t.Errorf("%s is sent to the build context", p)
		}
	}
	// The binary's packages and the module files, as `go list -deps` names them.
	out, err := exec.Command("go", "list", "-C", repoRoot, "-deps", "-f", `{{if not .Standard}}{{range .GoFiles}}{{$.Dir}}/{{.}}{{"\n"}}{{end}}{{range .EmbedFiles}}{{$.Dir}}/{{.}}{{"\n"}}{{end}}{{end}}`, "./cmd/xenorchestra-cloud-controller-manager").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	needed := []string{"go.mod", "go.sum"}
	for _, p := range strings.Fields(string(out)) {
		if rel, err := filepath.Rel(repoRoot, p); err == nil && filepath.IsLocal(rel) {
			needed = append(needed, filepath.ToSlash(rel))
		}
	}
	if !slices.Contains(needed, "cmd/xenorchestra-cloud-controller-manager/main.go") {
		t.Fatalf("go list found no main package: %v", needed)
	}
	for _, p := range needed {
		if excluded(p) {
			t.Errorf("%s, needed by go build, is excluded by .dockerignore", p)
		}
	}
}
