package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agext/levenshtein"
	"go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// userPasswordMessage explains why username and password are refused. XO accepts HTTP Basic
// on recent versions, but a token is revocable, scoped to this controller and not throttled.
const userPasswordMessage = "username/password login is not supported by this controller; " +
	"set token (or tokenFile, or " + EnvToken + ") to an XO authentication token instead: create one with " +
	"`xo-cli create-token <xo-url> <user>` or in XO's web UI under your user's authentication tokens"

// Load reads the configuration from the YAML (or JSON) file at path and from env, applies
// the defaults, and validates the result. path "" means the environment only; env nil means
// no environment (pass os.Getenv in production).
//
// The file holds one YAML document, in one of two forms. The single-server form has the
// server's keys at the top level (url, token, ...); the environment fills only those it
// leaves unset (absent, null or ""): XOA_URL fills url; XOA_TOKEN fills token unless the file
// sets token or tokenFile; XOA_INSECURE fills insecure (true/false, as strconv.ParseBool). The
// clusters form lists the servers under clusters; XOA_URL, XOA_TOKEN and XOA_INSECURE are then
// errors, not silently ignored. username, password, XOA_USER and XOA_PASSWORD are recognised
// and rejected: the controller authenticates with a token only. Relative tokenFile and caFile
// paths are resolved against the config file's directory.
//
// On failure Load returns a nil Config and an error: the read error when the file cannot be
// read; the parser's error when it is not one YAML document whose root is a mapping; else a
// utilerrors.Aggregate of *field.Error listing every problem, each naming its key (unknown
// keys at any depth included). No error holds the token. Call Warnings on the result and log
// them.
func Load(path string, env func(string) string) (*Config, error) {
	return LoadFiles(path, env, readRegularFile)
}

// LoadFiles is Load reading the config file, its token files and its CA files with readFile
// (paths as the config gives them, relative ones resolved against path's directory): `check`
// and `explain` read them from the Secrets a controller's Pod mounts at those paths. Errors of
// readFile must not hold the path (a path-like key may hold a token put there by mistake).
func LoadFiles(path string, env func(string) string, readFile func(string) ([]byte, error)) (*Config, error) {
	var (
		data []byte
		dir  string
	)
	if path != "" {
		b, err := readFile(path)
		if err != nil {
			return nil, fmt.Errorf("config %s: %w", path, err)
		}
		data, dir = b, filepath.Dir(path)
	}
	c, err := load(data, dir, env, readFile)
	if err != nil {
		if path == "" {
			return nil, fmt.Errorf("config from environment: %w", err)
		}
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	return c, nil
}

// file is the YAML document: Config's sections, the single-server form's keys (Cluster's, at
// the top level) and the refused username and password.
type file struct {
	Config
	Cluster
	Username string `json:"username"`
	Password Secret `json:"password"`
}

// singleKeys are the top-level keys of the single-server form, which clusters replaces.
// requestTimeout and listTimeout are not among them: in both forms they are the defaults.
var singleKeys = []string{"enabled", "name", "url", "insecure", "token", "tokenFile", "caFile", "caBundle", "region", "pools"}

// SingleServerKeys returns the top-level keys of the single-server form, refused beside clusters
// (the chart's values schema is generated from it).
func SingleServerKeys() []string { return slices.Clone(singleKeys) }

// load is Load without the file system, so that tests and the fuzzer control every read.
// dir resolves relative tokenFile and caFile paths ("" leaves them relative).
func load(data []byte, dir string, env func(string) string, readFile func(string) ([]byte, error)) (*Config, error) {
	if env == nil {
		env = func(string) string { return "" }
	}
	secrets := []string{env(EnvToken), env(EnvPassword)}
	root, err := parse(data)
	if err != nil {
		// Not wrapped: the parser's message may quote the token (*<token>, an unknown alias).
		return nil, errors.New(newRedaction(append(secrets, scanSecrets(data)...)).text(err.Error()))
	}
	f := file{Config: *Default(), Cluster: Cluster{RequestTimeout: DefaultRequestTimeout, ListTimeout: DefaultListTimeout}}
	d := decoder{set: map[string]bool{}, walked: map[walk]bool{}, budget: maxValues}
	if root != nil {
		d.decode(root, reflect.ValueOf(&f).Elem(), nil)
	}
	errs := d.errs
	c := &f.Config
	// rename maps the path of a value to the name the user gave it: an environment variable,
	// tokenFile for a token read from it, the top-level default of a timeout.
	rename := map[string]string{}
	single := !d.set["clusters"]
	if single {
		errs = append(errs, f.fromEnv(env, d.set["insecure"], rename)...)
		c.Clusters = []Cluster{f.Cluster}
	} else {
		for _, k := range singleKeys {
			if d.set[k] {
				errs = append(errs, field.Forbidden(field.NewPath(k), "belongs to the single-server form: with clusters, set it in each entry"))
			}
		}
		for _, name := range []string{EnvURL, EnvToken, EnvInsecure} {
			if env(name) != "" {
				errs = append(errs, field.Forbidden(field.NewPath(name),
					"applies to the single-server form only: with clusters, set each entry's keys"))
			}
		}
		for i := range c.Clusters {
			cl, p := &c.Clusters[i], field.NewPath("clusters").Index(i)
			if path := p.Child("requestTimeout").String(); !d.set[path] {
				cl.RequestTimeout, rename[path] = f.RequestTimeout, "requestTimeout"
			}
			if path := p.Child("listTimeout").String(); !d.set[path] {
				cl.ListTimeout, rename[path] = f.ListTimeout, "listTimeout"
			}
		}
	}
	for _, name := range []string{EnvUser, EnvPassword} {
		if env(name) != "" {
			errs = append(errs, field.Forbidden(field.NewPath(name), userPasswordMessage))
		}
	}
	if f.Username != "" {
		errs = append(errs, field.Forbidden(field.NewPath("username"), userPasswordMessage))
	}
	if f.Password != "" {
		errs = append(errs, field.Forbidden(field.NewPath("password"), userPasswordMessage))
		secrets = append(secrets, string(f.Password))
	}
	for i := range c.Clusters {
		cl, p := &c.Clusters[i], field.NewPath("clusters").Index(i)
		cl.CAFile, cl.TokenFile = resolve(dir, cl.CAFile), resolve(dir, cl.TokenFile)
		// A token from a token file, or missing for want of a usable one, is the file's problem.
		if tf := p.Child("tokenFile").String(); d.set[tf] || single && d.set["tokenFile"] {
			rename[p.Child("token").String()] = tf
		}
		if e := cl.readTokenFile(p.Child("tokenFile"), readFile); e != nil {
			errs = append(errs, e)
		}
	}

	// A value with a problem already (ill-typed, unreadable token file) is not validated again.
	verrs := c.validate(readFile)
	for _, e := range slices.Concat(errs, verrs) {
		if to, ok := rename[e.Field]; ok {
			e.Field = to
		}
		if single {
			e.Field = strings.TrimPrefix(e.Field, "clusters[0].")
			e.Detail = strings.ReplaceAll(e.Detail, "clusters[0].", "")
		}
	}
	bad := map[string]bool{}
	for _, e := range errs {
		bad[e.Field] = true
	}
	for _, e := range verrs {
		if !covered(e.Field, bad) {
			errs = append(errs, e)
		}
	}
	// From the file, XOA_TOKEN or a token file; the top-level token also when clusters make it
	// a mistake; and what unknown keys hold.
	secrets = append(secrets, string(f.Token))
	for _, cl := range c.Clusters {
		secrets = append(secrets, string(cl.Token))
	}
	secrets = append(secrets, d.unread...)
	newRedaction(secrets).fields(errs)
	if n := len(errs) - maxProblems; n > 0 {
		errs = append(errs[:maxProblems], &field.Error{Type: field.ErrorTypeTooMany, Field: "...", BadValue: field.OmitValueType{},
			Detail: fmt.Sprintf("%d more problems not listed", n)})
	}
	if len(errs) > 0 {
		return nil, problems(errs)
	}
	for i := range c.Clusters {
		cl := &c.Clusters[i]
		cl.URL, _ = normalizeURL(cl.URL)
		cl.Name = cl.name()
	}
	return c, nil
}

// fromEnv fills the single-server keys the file leaves unset from the environment, recording
// in rename the values that came from there. insecureSet tells whether the file sets insecure.
func (f *file) fromEnv(env func(string) string, insecureSet bool, rename map[string]string) field.ErrorList {
	if v := strings.TrimSpace(env(EnvURL)); f.URL == "" && v != "" {
		f.URL, rename["clusters[0].url"] = v, EnvURL
	}
	// Trimmed: a Secret made with kubectl --from-file often ends in a newline.
	if v := strings.TrimSpace(env(EnvToken)); f.Token == "" && f.TokenFile == "" && v != "" {
		f.Token, rename["clusters[0].token"] = Secret(v), EnvToken
	}
	if v := env(EnvInsecure); !insecureSet && v != "" {
		b, err := strconv.ParseBool(strings.TrimSpace(v))
		if err != nil {
			return field.ErrorList{field.Invalid(field.NewPath(EnvInsecure), v, "must be true or false")}
		}
		f.Insecure = b
	}
	return nil
}

// resolve returns name relative to dir, unless it is "" or absolute.
func resolve(dir, name string) string {
	if dir == "" || name == "" || filepath.IsAbs(name) {
		return name
	}
	return filepath.Join(dir, name)
}

// readTokenFile reads TokenFile, if set, into Token, trimmed of surrounding space. p is
// TokenFile's path.
func (c *Cluster) readTokenFile(p *field.Path, readFile func(string) ([]byte, error)) *field.Error {
	switch {
	case c.TokenFile == "":
		return nil
	case c.Token != "":
		return field.Forbidden(p, "set either token or tokenFile, not both")
	}
	b, err := readFile(c.TokenFile)
	if err != nil {
		return field.Invalid(p, field.OmitValueType{}, unreadable(err, "the XO token"))
	}
	if c.Token = Secret(strings.TrimSpace(string(b))); c.Token == "" {
		return field.Invalid(p, field.OmitValueType{}, "the file is empty; want the path of a file holding the XO token")
	}
	return nil
}

// covered reports whether path, or a key or list that holds it, is in bad.
func covered(path string, bad map[string]bool) bool {
	for {
		if bad[path] {
			return true
		}
		i := strings.LastIndexAny(path, ".[")
		if i < 0 {
			return false
		}
		path = path[:i]
	}
}

// parse decodes data as one YAML document (JSON is YAML) whose root is a mapping. It returns
// nil for a file without content.
func parse(data []byte) (*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc, next yaml.Node
	if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("invalid YAML: %s", strings.TrimPrefix(err.Error(), "yaml: "))
	}
	// The rest of a multi-document file would otherwise be ignored without a word.
	if err := dec.Decode(&next); err == nil {
		return nil, fmt.Errorf("the file holds several YAML documents (the second starts on line %d): put every key in one", next.Line)
	} else if !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("invalid YAML: %s", strings.TrimPrefix(err.Error(), "yaml: "))
	}
	if len(doc.Content) == 0 || doc.Content[0].ShortTag() == "!!null" {
		return nil, nil
	}
	if root := doc.Content[0]; root.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("line %d: the file must be a mapping of keys (url: ..., token: ...), not %s", root.Line, kind(root))
	}
	return doc.Content[0], nil
}

// problems is the error of an invalid configuration: every problem, counted when there are
// several, so that a reader knows the list is whole.
func problems(errs field.ErrorList) error {
	if len(errs) == 1 {
		return fmt.Errorf("invalid configuration: %w", errs.ToAggregate())
	}
	return fmt.Errorf("invalid configuration (%d problems): %w", len(errs), errs.ToAggregate())
}

// maxProblems bounds the problems listed: no one reads more, and an Aggregate's message takes
// a time quadratic in their number.
const maxProblems = 100

// maxValues bounds the values decoded, each use of an alias counted: a few aliases to aliases
// can make a small file expand enormously.
const maxValues = 10_000

// decoder sets typed values from a YAML node tree, by their JSON key names, and leaves each
// value's own decoding to yaml.v3 (Node.Decode). It walks the keys itself because the Kubernetes
// libraries' strict decoding (sigs.k8s.io/yaml's YAML-to-JSON conversion, then
// sigs.k8s.io/json.UnmarshalStrict) does not list every problem. Given
//
//	clusters:
//	- url: https://xo
//	  tokne: <token>
//	  insecure: "yes"
//	  requestTimeout: 5
//	- url: https://xo2
//	  url: https://xo3
//	  requestTimeout: soon
//
// the strict conversion answers only "line 7: key "url" already set in map" (a key given twice
// ends it); without it, the last url wins silently and UnmarshalStrict answers only "cannot
// unmarshal string into Go struct field Cluster.Config.clusters.insecure of type bool": the first
// ill-typed value, at a Go path without the list index, and not the unknown key tokne, which it
// reports, by its path clusters[0].tokne, only when no value is ill-typed. YAML 1.1, which
// sigs.k8s.io/yaml speaks, also rewrites a string key's value when it looks like a number or a
// boolean: the pool 010 becomes "8", the region no "false". This decoder reports every unknown key
// (with a hint when it looks misspelt), key given twice and ill-typed value at its key path and
// line, reads YAML 1.2 (010 is "010"; only true and false are booleans, so insecure: "yes" is
// refused), and goes on. TestKubernetesStrictDecodingFallsShort checks these answers against the
// libraries in go.mod, so that an upgrade that improves them shows.
type decoder struct {
	errs field.ErrorList
	// set holds the paths of the keys set to something other than null.
	set map[string]bool
	// unread holds what unknown keys hold that may be secrets; walked, the nodes already
	// searched for them (see unreadSecrets).
	unread []string
	walked map[walk]bool
	budget int
}

// walk is a node of the value of an unknown key, and whether it sits under a key spelt like a
// secret key.
type walk struct {
	n      *yaml.Node
	secret bool
}

// spend counts n against the budget and reports whether it was within; the first node beyond
// is reported.
func (d *decoder) spend(n *yaml.Node, path *field.Path) bool {
	if d.budget--; d.budget == -1 {
		d.errs = append(d.errs, field.Invalid(path, field.OmitValueType{},
			fmt.Sprintf("line %d: the file expands to more than %d keys and values (through aliases)", n.Line, maxValues)))
	}
	return d.budget >= 0
}

// decode sets v from n, found at path.
func (d *decoder) decode(n *yaml.Node, v reflect.Value, path *field.Path) {
	if !d.spend(n, path) {
		return
	}
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n.ShortTag() == "!!null" {
		return // null keeps the default
	}
	d.set[path.String()] = true
	switch {
	case v.Kind() == reflect.Struct && n.Kind == yaml.MappingNode:
		d.mapping(n, v, path)
	case v.Kind() == reflect.Slice && n.Kind == yaml.SequenceNode:
		v.Set(reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content)))
		for i, item := range n.Content {
			d.decode(item, v.Index(i), path.Index(i))
		}
	case v.Kind() == reflect.Struct || v.Kind() == reflect.Slice ||
		// Only a YAML boolean: yaml.v3 decodes the strings yes, on and y (YAML 1.1), quoted or
		// not, into a bool as true, and would quietly turn on insecure for insecure: "yes".
		isBool(v.Type()) && n.ShortTag() != "!!bool" ||
		n.Decode(v.Addr().Interface()) != nil:
		var value any = field.OmitValueType{}
		if n.Kind == yaml.ScalarNode && v.Type() != reflect.TypeFor[Secret]() {
			value = n.Value
		}
		detail := fmt.Sprintf("line %d: must be %s", n.Line, wants(v.Type()))
		if k := kind(n); k != "a string" {
			detail += ", not " + k
		} else if isBool(v.Type()) {
			// "true" in quotes is a string.
			detail += ", unquoted"
		}
		d.errs = append(d.errs, field.Invalid(path, value, detail))
	}
}

// mapping sets the fields of the struct v from the keys of the mapping n.
func (d *decoder) mapping(n *yaml.Node, v reflect.Value, path *field.Path) {
	known := map[string][]int{}
	for _, f := range reflect.VisibleFields(v.Type()) {
		if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); name != "" && !f.Anonymous {
			known[name] = f.Index
		}
	}
	lines := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		if !d.spend(k, path) {
			return
		}
		p := path.Child(keyName(k.Value))
		if k.Kind != yaml.ScalarNode {
			// "?" introduces such a key in YAML.
			d.errs = append(d.errs, field.Invalid(path.Child("?"), field.OmitValueType{},
				fmt.Sprintf("line %d: a key must be a string, not %s", k.Line, kind(k))))
			continue
		}
		if first := lines[k.Value]; first > 0 {
			e := field.Duplicate(p, field.OmitValueType{})
			e.Detail = fmt.Sprintf("line %d: already set on line %d", k.Line, first)
			d.errs = append(d.errs, e)
			continue
		}
		lines[k.Value] = k.Line
		if index, ok := known[k.Value]; ok {
			d.decode(n.Content[i+1], v.FieldByIndex(index), p)
			continue
		}
		if k.ShortTag() == "!!merge" {
			d.errs = append(d.errs, field.Invalid(p, field.OmitValueType{},
				fmt.Sprintf("line %d: YAML merge keys (<<) are not supported: write the keys out", k.Line)))
			d.unreadSecrets(n.Content[i+1], false)
			continue
		}
		e := field.NotSupported[string](p, field.OmitValueType{}, nil)
		e.Detail = fmt.Sprintf("line %d: unknown key", k.Line)
		if hint := suggest(k.Value, known); hint != "" {
			e.Detail += " (did you mean " + hint + "?)"
		}
		d.errs = append(d.errs, e)
		d.unreadSecrets(n.Content[i+1], secretKey(k.Value))
	}
}

// unreadSecrets adds to d.unread what the value v of an unknown key may hold of a secret: the
// scalars of v when the key is spelt like a secret key (secret), and those under such keys at
// any depth of v. The decoder reads nothing under an unknown key, so redaction learns of them
// only here: a token under "Token:" or "tokne:" is still the token. Each list and mapping is
// walked at most once in each of the two cases, however many aliases lead to it.
func (d *decoder) unreadSecrets(v *yaml.Node, secret bool) {
	if v.Kind == yaml.AliasNode {
		v = v.Alias
	}
	switch {
	case v == nil || d.walked[walk{v, secret}]:
		return
	case v.Kind == yaml.ScalarNode:
		if secret {
			d.unread = append(d.unread, v.Value)
		}
		return
	}
	d.walked[walk{v, secret}] = true
	for i, c := range v.Content {
		switch {
		case v.Kind == yaml.SequenceNode:
			d.unreadSecrets(c, secret)
		case v.Kind == yaml.MappingNode && i%2 == 1:
			d.unreadSecrets(c, secretKey(v.Content[i-1].Value))
		}
	}
}

// secretKey reports whether k is spelt like token or password: either within it, any case, or
// at most 2 edits from one of them.
func secretKey(k string) bool {
	k = strings.ToLower(k)
	for _, s := range []string{"token", "password"} {
		if strings.Contains(k, s) || levenshtein.Distance(k, s, nil) <= 2 {
			return true
		}
	}
	return false
}

// isBool reports whether t is bool or *bool.
func isBool(t reflect.Type) bool {
	return t.Kind() == reflect.Bool || t.Kind() == reflect.Pointer && t.Elem().Kind() == reflect.Bool
}

// wants names what a value of type t is written as.
func wants(t reflect.Type) string {
	switch {
	case t == reflect.TypeFor[time.Duration]():
		return `a duration such as "30s", "5m" or "1h"`
	case isBool(t):
		return "true or false"
	case t.Kind() == reflect.String:
		return "a string"
	case t.Kind() == reflect.Slice:
		return "a list"
	}
	return "a mapping of keys"
}

// kind names the type of n's value, without the value.
func kind(n *yaml.Node) string {
	switch {
	case n.Kind == yaml.SequenceNode:
		return "a list"
	case n.Kind == yaml.MappingNode:
		return "a mapping"
	case n.ShortTag() == "!!int" || n.ShortTag() == "!!float":
		return "a number"
	case n.ShortTag() == "!!bool":
		return "a boolean"
	}
	return "a string"
}

var plainKey = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// keyName is k as a path element: quoted unless it is a plain word.
func keyName(k string) string {
	if plainKey.MatchString(k) {
		return k
	}
	return strconv.Quote(k)
}

// suggest returns the known key closest to k (case-insensitive, at most 2 edits), or "".
func suggest(k string, known map[string][]int) string {
	if _, ok := known["requestTimeout"]; ok && k == "clientTimeout" {
		return "requestTimeout" // the upstream shared library's name for it
	}
	best, bestDist := "", 3
	for c := range known {
		if len(k) > len(c)+2 || len(c) > len(k)+2 {
			continue // more than 2 edits away, and a long key is not compared
		}
		d := levenshtein.Distance(strings.ToLower(k), strings.ToLower(c), nil)
		if d < bestDist || d == bestDist && c < best {
			best, bestDist = c, d
		}
	}
	return best
}
