package charts

import (
	"bufio"
	"debug/elf"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// Docker cannot run here, so the Dockerfile is checked by reading it: its structure, a lint
// (the hadolint rules that apply to it; hadolint itself is not packaged for Debian), and its
// build command against the Makefile's `build` recipe, argument for argument.

// dfInstruction is one Dockerfile instruction, continuation lines joined.
type dfInstruction struct {
	Line    int
	Keyword string // as written
	Cmd     string // upper case
	Flags   map[string]string
	Args    string // after the flags
}

// dfStage is one FROM and the instructions after it.
type dfStage struct {
	Image, Name string
	From        dfInstruction
	Steps       []dfInstruction
}

// parseDockerfile splits a Dockerfile into instructions and stages. It understands comments,
// parser directives, the default escape character and --flag=value options; it rejects
// instructions before the first FROM other than ARG, and lines it cannot read.
func parseDockerfile(src string) (args []dfInstruction, stages []dfStage, err error) {
	var insts []dfInstruction
	var cur strings.Builder
	start := 0
	sc := bufio.NewScanner(strings.NewReader(src))
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "#") || (trimmed == "" && cur.Len() == 0) {
			continue
		}
		if cur.Len() == 0 {
			start = n
		}
		if cont, ok := strings.CutSuffix(strings.TrimRight(line, " \t"), `\`); ok {
			cur.WriteString(cont)
			cur.WriteString(" ")
			continue
		}
		cur.WriteString(line)
		inst, err := parseInstruction(start, cur.String())
		if err != nil {
			return nil, nil, err
		}
		insts = append(insts, inst)
		cur.Reset()
	}
	if err := sc.Err(); err != nil {
		return nil, nil, fmt.Errorf("read Dockerfile: %w", err)
	}
	if cur.Len() != 0 {
		return nil, nil, fmt.Errorf("line %d: continuation at end of file", start)
	}
	for _, inst := range insts {
		if inst.Cmd == "FROM" {
			f := strings.Fields(inst.Args)
			st := dfStage{From: inst}
			switch {
			case len(f) == 1:
				st.Image = f[0]
			case len(f) == 3 && strings.EqualFold(f[1], "AS"):
				st.Image, st.Name = f[0], f[2]
			default:
				return nil, nil, fmt.Errorf("line %d: FROM %q: want IMAGE [AS NAME]", inst.Line, inst.Args)
			}
			stages = append(stages, st)
			continue
		}
		if len(stages) == 0 {
			if inst.Cmd != "ARG" {
				return nil, nil, fmt.Errorf("line %d: %s before the first FROM", inst.Line, inst.Keyword)
			}
			args = append(args, inst)
			continue
		}
		stages[len(stages)-1].Steps = append(stages[len(stages)-1].Steps, inst)
	}
	return args, stages, nil
}

var knownInstructions = []string{"ADD", "ARG", "CMD", "COPY", "ENTRYPOINT", "ENV", "EXPOSE", "FROM", "HEALTHCHECK",
	"LABEL", "MAINTAINER", "ONBUILD", "RUN", "SHELL", "STOPSIGNAL", "USER", "VOLUME", "WORKDIR"}

func parseInstruction(line int, text string) (dfInstruction, error) {
	text = strings.TrimSpace(text)
	kw, rest, _ := strings.Cut(text, " ")
	inst := dfInstruction{Line: line, Keyword: kw, Cmd: strings.ToUpper(kw), Flags: map[string]string{}}
	if !slices.Contains(knownInstructions, inst.Cmd) {
		return inst, fmt.Errorf("line %d: unknown instruction %q", line, kw)
	}
	rest = strings.TrimSpace(rest)
	for strings.HasPrefix(rest, "--") {
		flag, after, _ := strings.Cut(rest, " ")
		k, v, _ := strings.Cut(strings.TrimPrefix(flag, "--"), "=")
		inst.Flags[k] = v
		rest = strings.TrimSpace(after)
	}
	inst.Args = rest
	if rest == "" {
		return inst, fmt.Errorf("line %d: %s without arguments", line, kw)
	}
	return inst, nil
}

// shellWords splits a command line the way a POSIX shell does for the simple commands used
// here: quotes, backslashes and variable expansion with vars (${X} and $X inside double quotes
// or bare; an unquoted expansion is split on blanks). Unset variables are errors.
func shellWords(s string, vars map[string]string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	expand := func(i int, quoted bool) (int, error) {
		// s[i] == '$'
		var name string
		j := i + 1
		switch {
		case j < len(s) && s[j] == '{':
			end := strings.IndexByte(s[j:], '}')
			if end < 0 {
				return 0, fmt.Errorf("unclosed ${ in %q", s)
			}
			name, j = s[j+1:j+end], j+end+1
		default:
			k := j
			for k < len(s) && (s[k] == '_' || s[k] >= 'A' && s[k] <= 'Z' || s[k] >= 'a' && s[k] <= 'z' || s[k] >= '0' && s[k] <= '9') {
				k++
			}
			name, j = s[j:k], k
		}
		if name == "" {
			return 0, fmt.Errorf("bare $ in %q", s)
		}
		v, ok := vars[name]
		if !ok {
			return 0, fmt.Errorf("variable %s is not set", name)
		}
		if quoted {
			cur.WriteString(v)
			inWord = true
			return j, nil
		}
		for k, f := range strings.Fields(v) {
			if k > 0 {
				words = append(words, cur.String())
				cur.Reset()
			}
			cur.WriteString(f)
			inWord = true
		}
		return j, nil
	}
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
			i++
		case c == '\'':
			end := strings.IndexByte(s[i+1:], '\'')
			if end < 0 {
				return nil, fmt.Errorf("unclosed ' in %q", s)
			}
			cur.WriteString(s[i+1 : i+1+end])
			inWord = true
			i += end + 2
		case c == '"':
			inWord = true
			i++
			for {
				if i >= len(s) {
					return nil, fmt.Errorf(`unclosed " in %q`, s)
				}
				if s[i] == '"' {
					i++
					break
				}
				if s[i] == '\\' && i+1 < len(s) && strings.IndexByte("$`\"\\", s[i+1]) >= 0 {
					cur.WriteByte(s[i+1])
					i += 2
					continue
				}
				if s[i] == '$' {
					j, err := expand(i, true)
					if err != nil {
						return nil, err
					}
					i = j
					continue
				}
				cur.WriteByte(s[i])
				i++
			}
		case c == '\\':
			if i+1 < len(s) {
				cur.WriteByte(s[i+1])
				inWord = true
			}
			i += 2
		case c == '$':
			j, err := expand(i, false)
			if err != nil {
				return nil, err
			}
			i = j
		case strings.IndexByte(";&|<>`()", c) >= 0:
			return nil, fmt.Errorf("shell operator %q in %q: keep the build one simple command", c, s)
		default:
			cur.WriteByte(c)
			inWord = true
			i++
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}

// makeVars reads the simple variable assignments of a Makefile (NAME := / ?= / = value) and the
// recipe of one target.
func makeVars(src, target string) (vars map[string]string, recipe []string, err error) {
	vars = map[string]string{}
	assign := regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]*)\s*(:=|\?=|=)\s*(.*)$`)
	lines := strings.Split(src, "\n")
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if m := assign.FindStringSubmatch(line); m != nil {
			vars[m[1]] = strings.TrimSpace(m[3])
			continue
		}
		if strings.HasPrefix(line, target+":") {
			for i++; i < len(lines) && strings.HasPrefix(lines[i], "\t"); i++ {
				recipe = append(recipe, strings.TrimPrefix(lines[i], "\t"))
			}
			i--
		}
	}
	if len(recipe) == 0 {
		return nil, nil, fmt.Errorf("no recipe for target %q", target)
	}
	return vars, recipe, nil
}

// makeExpand expands $(VAR) references recursively, as make does for recipes.
func makeExpand(s string, vars map[string]string, depth int) (string, error) {
	if depth > 10 {
		return "", fmt.Errorf("recursive variable in %q", s)
	}
	ref := regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)
	var err error
	out := ref.ReplaceAllStringFunc(s, func(m string) string {
		name := ref.FindStringSubmatch(m)[1]
		v, ok := vars[name]
		if !ok {
			err = fmt.Errorf("make variable %s is not set", name)
			return ""
		}
		x, e := makeExpand(v, vars, depth+1)
		if e != nil {
			err = e
		}
		return x
	})
	if err != nil {
		return "", err
	}
	if strings.Contains(out, "$(") {
		return "", fmt.Errorf("unsupported make expansion in %q", out)
	}
	return strings.ReplaceAll(out, "$$", "$"), nil
}

// The values both builds are compared with: the version is a build input, the output folder
// only a location.
const (
	testVersion = "v9.9.9-test"
	testBin     = "/OUT"
)

// makeBuildCommand returns the argv of the Makefile's build recipe.
func makeBuildCommand(t *testing.T) []string {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(repoRoot, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	vars, recipe, err := makeVars(string(src), "build")
	if err != nil {
		t.Fatalf("Makefile: %v", err)
	}
	if len(recipe) != 1 {
		t.Fatalf("Makefile build recipe has %d lines, want 1 (the Dockerfile mirrors it): %q", len(recipe), recipe)
	}
	vars["VERSION"], vars["BIN"] = testVersion, testBin
	line, err := makeExpand(strings.TrimLeft(recipe[0], "@-+"), vars, 0)
	if err != nil {
		t.Fatalf("Makefile build recipe: %v", err)
	}
	words, err := shellWords(line, nil)
	if err != nil {
		t.Fatalf("Makefile build recipe: %v", err)
	}
	return words
}

// stageArgs evaluates a stage's ARGs in order (global ARGs first), with overrides as
// --build-arg values.
func stageArgs(t *testing.T, global []dfInstruction, st dfStage, upTo int, overrides map[string]string) map[string]string {
	t.Helper()
	vars := map[string]string{}
	for _, inst := range append(slices.Clone(global), st.Steps[:upTo]...) {
		if inst.Cmd != "ARG" {
			continue
		}
		name, def, hasDef := strings.Cut(inst.Args, "=")
		if v, ok := overrides[name]; ok {
			vars[name] = v
			continue
		}
		if !hasDef {
			continue
		}
		words, err := shellWords(def, vars)
		if err != nil || len(words) != 1 {
			t.Fatalf("line %d: ARG %s default %q: %v", inst.Line, name, def, err)
		}
		vars[name] = words[0]
	}
	return vars
}

func readDockerfile(t *testing.T) ([]dfInstruction, []dfStage) {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(repoRoot, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	global, stages, err := parseDockerfile(string(src))
	if err != nil {
		t.Fatalf("Dockerfile: %v", err)
	}
	if len(stages) < 2 {
		t.Fatalf("Dockerfile has %d stages, want a builder and a runtime stage", len(stages))
	}
	return global, stages
}

// findStep returns the index of the first step of a stage matching cmd and a predicate on its
// args, or -1.
func findStep(st dfStage, cmd string, match func(string) bool) int {
	return slices.IndexFunc(st.Steps, func(i dfInstruction) bool { return i.Cmd == cmd && match(i.Args) })
}

func TestDockerfileBuildMatchesMakefile(t *testing.T) {
	global, stages := readDockerfile(t)
	builder, final := stages[0], stages[len(stages)-1]

	if !regexp.MustCompile(`^golang:1\.26(\.\d+)?(-[a-z0-9.]+)?(@sha256:[a-f0-9]{64})?$`).MatchString(builder.Image) {
		t.Errorf("builder image %s, want golang:1.26 (the go.mod toolchain)", builder.Image)
	}

	// go.mod and go.sum alone, then go mod download, then the source: the module layer is
	// reused until the dependencies change.
	copyMod := findStep(builder, "COPY", func(a string) bool {
		f := strings.Fields(a)
		return len(f) == 3 && slices.Contains(f[:2], "go.mod") && slices.Contains(f[:2], "go.sum")
	})
	download := findStep(builder, "RUN", func(a string) bool { return strings.Contains(a, "go mod download") })
	copySrc := findStep(builder, "COPY", func(a string) bool { return strings.HasPrefix(a, ". ") })
	build := findStep(builder, "RUN", func(a string) bool { return strings.Contains(a, "go build") })
	if copyMod < 0 || download < 0 || copySrc < 0 || build < 0 || copyMod >= download || download >= copySrc || copySrc >= build {
		t.Fatalf("builder steps COPY go.mod go.sum (%d), RUN go mod download (%d), COPY . (%d), RUN go build (%d): want them present and in this order", copyMod, download, copySrc, build)
	}

	// The build command, ARGs expanded as docker would with --build-arg VERSION, equals the
	// Makefile's, argument for argument.
	vars := stageArgs(t, global, builder, build, map[string]string{"VERSION": testVersion})
	if _, ok := vars["VERSION"]; !ok {
		t.Fatal("builder stage has no ARG VERSION: the image would not be version-stamped")
	}
	buildVars := map[string]string{}
	for k, v := range vars {
		buildVars[k] = v
	}
	buildVars["BIN"] = testBin
	got, err := shellWords(builder.Steps[build].Args, buildVars)
	if err != nil {
		t.Fatalf("line %d: %v", builder.Steps[build].Line, err)
	}
	want := makeBuildCommand(t)
	if !slices.Equal(got, want) {
		t.Errorf("Dockerfile build command differs from `make build`:\n docker: %q\n   make: %q", got, want)
	}
	if !slices.Contains(got, "CGO_ENABLED=0") || !slices.Contains(got, "-trimpath") {
		t.Errorf("build %q lacks CGO_ENABLED=0 or -trimpath", got)
	}
	if !slices.ContainsFunc(got, func(w string) bool { return strings.Contains(w, "/cmd/app.version="+testVersion) }) {
		t.Errorf("build %q does not stamp the version", got)
	}

	// The runtime stage copies exactly the binary the build wrote and runs it.
	out, err := shellWords(builder.Steps[build].Args, vars)
	if err != nil {
		t.Fatal(err)
	}
	binary := out[slices.Index(out, "-o")+1]
	cp := findStep(final, "COPY", func(string) bool { return true })
	if cp < 0 || final.Steps[cp].Flags["from"] != builder.Name || strings.Fields(final.Steps[cp].Args)[0] != binary {
		t.Fatalf("runtime stage does not COPY --from=%s %s", builder.Name, binary)
	}
	dest := strings.Fields(final.Steps[cp].Args)[1]
	ep := findStep(final, "ENTRYPOINT", func(string) bool { return true })
	var entry []string
	if ep < 0 || json.Unmarshal([]byte(final.Steps[ep].Args), &entry) != nil || len(entry) == 0 || entry[0] != dest {
		t.Errorf("ENTRYPOINT is not [%q] in JSON form", dest)
	}
}

// TestDockerfileBuildStepsRun runs the builder stage's go mod download and build command, as
// docker would with --build-arg VERSION, writing the binary to a temporary folder: the result
// must be a static executable that reports the stamped version.
func TestDockerfileBuildStepsRun(t *testing.T) {
	global, stages := readDockerfile(t)
	builder := stages[0]
	for i, st := range builder.Steps {
		if st.Cmd != "RUN" {
			continue
		}
		vars := stageArgs(t, global, builder, i, map[string]string{"VERSION": testVersion})
		vars["BIN"] = t.TempDir()
		argv, err := shellWords(st.Args, vars)
		if err != nil {
			t.Fatalf("line %d: %v", st.Line, err)
		}
		env := os.Environ()
		for len(argv) > 0 && strings.Contains(argv[0], "=") {
			env = append(env, argv[0])
			argv = argv[1:]
		}
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Dir, cmd.Env = repoRoot, env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("line %d: %q: %v\n%s", st.Line, argv, err, out)
		}
		o := slices.Index(argv, "-o")
		if o < 0 {
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
	_, stages := readDockerfile(t)
	final := stages[len(stages)-1]
	if !regexp.MustCompile(`^gcr\.io/distroless/static-debian1[2-9]:nonroot(@sha256:[a-f0-9]{64})?$`).MatchString(final.Image) {
		t.Errorf("runtime image %s, want gcr.io/distroless/static-debian12:nonroot", final.Image)
	}
	user := findStep(final, "USER", func(string) bool { return true })
	if user < 0 || !slices.Contains([]string{"65532", "65532:65532"}, final.Steps[user].Args) {
		t.Errorf("runtime stage USER is not 65532 (the chart's runAsUser)")
	}
	for _, s := range final.Steps {
		if s.Cmd == "RUN" {
			t.Errorf("line %d: RUN in the runtime stage: distroless has no shell", s.Line)
		}
	}
}

// TestDockerfileLint applies the hadolint rules that bear on this Dockerfile.
func TestDockerfileLint(t *testing.T) {
	global, stages := readDockerfile(t)
	names := map[string]bool{}
	for i, st := range stages {
		insts := append([]dfInstruction{st.From}, st.Steps...)
		if i == 0 {
			insts = append(slices.Clone(global), insts...)
		}
		if st.Name != "" {
			if names[st.Name] {
				t.Errorf("line %d: stage name %s reused (DL3024)", st.From.Line, st.Name)
			}
			names[st.Name] = true
		}
		if !names[st.Image] {
			ref := st.Image
			if at := strings.Index(ref, "@"); at >= 0 {
				ref = ref[:at]
			}
			slash := strings.LastIndex(ref, "/")
			colon := strings.LastIndex(ref, ":")
			if colon <= slash && !strings.Contains(st.Image, "@") {
				t.Errorf("line %d: FROM %s without a tag (DL3006)", st.From.Line, st.Image)
			} else if strings.HasSuffix(ref, ":latest") {
				t.Errorf("line %d: FROM %s uses latest (DL3007)", st.From.Line, st.Image)
			}
		}
		for _, inst := range insts {
			if inst.Keyword != inst.Cmd {
				t.Errorf("line %d: instruction %s not in upper case", inst.Line, inst.Keyword)
			}
			switch inst.Cmd {
			case "MAINTAINER":
				t.Errorf("line %d: MAINTAINER is deprecated (DL4000)", inst.Line)
			case "ADD":
				t.Errorf("line %d: ADD instead of COPY (DL3020)", inst.Line)
			case "WORKDIR":
				if !strings.HasPrefix(inst.Args, "/") && !strings.HasPrefix(inst.Args, "$") {
					t.Errorf("line %d: relative WORKDIR %s (DL3000)", inst.Line, inst.Args)
				}
			case "CMD", "ENTRYPOINT":
				var v []string
				if json.Unmarshal([]byte(inst.Args), &v) != nil {
					t.Errorf("line %d: %s in shell form (DL3025)", inst.Line, inst.Cmd)
				}
			case "COPY":
				if from, ok := inst.Flags["from"]; ok && !names[from] {
					t.Errorf("line %d: COPY --from=%s names no earlier stage (DL3022)", inst.Line, from)
				}
			case "RUN":
				if strings.Contains(inst.Args, "cd ") {
					t.Errorf("line %d: cd in RUN; use WORKDIR (DL3003)", inst.Line)
				}
				if strings.Contains(inst.Args, "sudo") {
					t.Errorf("line %d: sudo in RUN (DL3004)", inst.Line)
				}
			}
		}
		if strings.Contains(st.From.Args, " as ") {
			t.Errorf("line %d: FROM ... as: keep AS in the keyword's case (FromAsCasing)", st.From.Line)
		}
	}
	last := stages[len(stages)-1]
	if u := findStep(last, "USER", func(string) bool { return true }); u < 0 || strings.HasPrefix(last.Steps[u].Args, "root") || strings.HasPrefix(last.Steps[u].Args, "0") {
		t.Error("the image runs as root (DL3002)")
	}
}

// dockerignoreMatch reports whether a slash-separated path is excluded by the .dockerignore
// patterns (the last matching pattern wins; ! re-includes; a pattern matches a path or any of
// its parent folders; ** matches any number of folders).
func dockerignoreMatch(patterns []string, path string) bool {
	excluded := false
	for _, p := range patterns {
		neg := strings.HasPrefix(p, "!")
		p = strings.TrimPrefix(strings.TrimPrefix(p, "!"), "/")
		re := regexp.QuoteMeta(p)
		re = strings.ReplaceAll(re, `\*\*/`, `(.*/)?`)
		re = strings.ReplaceAll(re, `\*\*`, `.*`)
		re = strings.ReplaceAll(re, `\*`, `[^/]*`)
		re = strings.ReplaceAll(re, `\?`, `[^/]`)
		if regexp.MustCompile(`^` + re + `(/.*)?$`).MatchString(path) {
			excluded = !neg
		}
	}
	return excluded
}

// TestDockerignore checks that the build context keeps every file `go build` of the binary
// needs and leaves out VCS data, build outputs and tests.
func TestDockerignore(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot, ".dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	var patterns []string
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			patterns = append(patterns, l)
		}
	}
	for _, p := range []string{".git/config", "bin/xenorchestra-cloud-controller-manager", "config/load_test.go", "config/testdata/example.yaml"} {
		if !dockerignoreMatch(patterns, p) {
			t.Errorf("%s is sent to the build context", p)
		}
	}
	needed := []string{"go.mod", "go.sum"}
	// The binary's packages: every non-test Go file outside hack/, charts/ and testdata.
	err = filepath.WalkDir(repoRoot, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(repoRoot, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if base := d.Name(); base == "testdata" || rel == "hack" || rel == "charts" || rel == "bin" || strings.HasPrefix(base, ".") && rel != "." {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(rel, ".go") && !strings.HasSuffix(rel, "_test.go") {
			needed = append(needed, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(needed, "cmd/xenorchestra-cloud-controller-manager/main.go") {
		t.Fatalf("walk found no main package: %v", needed)
	}
	for _, p := range needed {
		if dockerignoreMatch(patterns, p) {
			t.Errorf("%s, needed by go build, is excluded by .dockerignore", p)
		}
	}
}

func TestShellWords(t *testing.T) {
	vars := map[string]string{"A": "x y", "B": "z"}
	cases := []struct {
		in      string
		want    []string
		wantErr bool
	}{
		{in: `go build -o out ./cmd`, want: []string{"go", "build", "-o", "out", "./cmd"}},
		{in: `-ldflags "-s $A" '-X $B'`, want: []string{"-ldflags", "-s x y", "-X $B"}},
		{in: `${A}/${B}`, want: []string{"x", "y/z"}},
		{in: `"a\"b" c\ d`, want: []string{`a"b`, "c d"}},
		{in: `a "" b`, want: []string{"a", "", "b"}},
		{in: `$MISSING`, wantErr: true},
		{in: `"open`, wantErr: true},
		{in: `a && b`, wantErr: true},
		{in: `${A`, wantErr: true},
	}
	for _, c := range cases {
		got, err := shellWords(c.in, vars)
		if (err != nil) != c.wantErr || (!c.wantErr && !slices.Equal(got, c.want)) {
			t.Errorf("shellWords(%q) = %q, %v; want %q, error %v", c.in, got, err, c.want, c.wantErr)
		}
	}
}

func TestParseDockerfile(t *testing.T) {
	cases := []struct {
		name, src string
		stages    int
		wantErr   bool
	}{
		{name: "stages", src: "ARG X=1\nFROM a:1 AS b\nRUN x \\\n  y\n# c\nFROM c:2\nCOPY --from=b /a /a\n", stages: 2},
		{name: "instruction before FROM", src: "RUN x\nFROM a:1\n", wantErr: true},
		{name: "unknown instruction", src: "FROM a:1\nRUNN x\n", wantErr: true},
		{name: "dangling continuation", src: "FROM a:1\nRUN x \\\n", wantErr: true},
		{name: "bad FROM", src: "FROM a:1 b\n", wantErr: true},
		{name: "empty instruction", src: "FROM a:1\nRUN\n", wantErr: true},
	}
	for _, c := range cases {
		_, stages, err := parseDockerfile(c.src)
		if (err != nil) != c.wantErr || (!c.wantErr && len(stages) != c.stages) {
			t.Errorf("%s: %d stages, error %v", c.name, len(stages), err)
		}
	}
	_, stages, err := parseDockerfile("FROM a:1 AS b\nRUN x \\\n  y\n")
	if err != nil || stages[0].Name != "b" || stages[0].Steps[0].Args != "x    y" || stages[0].Steps[0].Line != 2 {
		t.Errorf("continuation: %+v %v", stages, err)
	}
}

func FuzzParseDockerfile(f *testing.F) {
	if b, err := os.ReadFile(filepath.Join(repoRoot, "Dockerfile")); err == nil {
		f.Add(string(b))
	}
	f.Add("FROM a AS b\nRUN x \\\n y\nCOPY --from=b a b\n")
	f.Fuzz(func(t *testing.T, src string) {
		_, stages, err := parseDockerfile(src)
		if err != nil {
			return
		}
		for _, st := range stages {
			if st.Image == "" {
				t.Fatalf("stage without image from %q", src)
			}
			for _, s := range st.Steps {
				_, _ = shellWords(s.Args, map[string]string{})
			}
		}
	})
}
