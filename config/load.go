package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
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
// Precedence: the file wins. An environment variable fills only a key the file leaves
// unset (absent, null or ""): XOA_URL fills url; XOA_TOKEN fills token unless the file sets
// token or tokenFile; XOA_INSECURE fills insecure (true/false, as strconv.ParseBool).
// username, password, XOA_USER and XOA_PASSWORD are recognised and rejected: the
// controller authenticates with a token only. Relative tokenFile and caFile paths are
// resolved against the config file's directory.
//
// On failure Load returns a nil Config and an error: the read error when the file cannot
// be read, else one wrapping Errors, which lists every problem, each naming its key
// (unknown keys at any depth included). No error holds the token. Call Warnings on the
// result and log them.
func Load(path string, env func(string) string) (*Config, error) {
	l := loader{env: env, readFile: readRegularFile}
	var data []byte
	if path != "" {
		b, err := readRegularFile(path)
		if err != nil {
			return nil, fmt.Errorf("config: %w", err)
		}
		data, l.dir = b, filepath.Dir(path)
	}
	c, err := l.load(data)
	if err != nil {
		if path == "" {
			return nil, fmt.Errorf("config from environment: %w", err)
		}
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	return c, nil
}

// loader is Load without the file system, so that tests and the fuzzer control every read.
type loader struct {
	env      func(string) string
	readFile func(string) ([]byte, error)
	// dir resolves relative tokenFile and caFile paths; "" leaves them relative to the
	// working directory.
	dir string
}

// fileKeys records which keys the file set, so the environment fills only the others.
type fileKeys struct {
	url, token, tokenFile, insecure bool
}

func (l *loader) load(data []byte) (*Config, error) {
	env := l.env
	if env == nil {
		env = func(string) string { return "" }
	}
	var p problems
	// Every value that may be a secret, redacted from the messages at the end.
	secrets := scanSecrets(data)
	secrets = append(secrets, env(EnvToken), env(EnvPassword))

	doc, ok := parseDoc(data, &p)
	if !ok {
		p.list.redact(secrets)
		return nil, p.err()
	}
	for _, k := range []string{"token", "password"} {
		if s, ok := doc[k].(string); ok {
			secrets = append(secrets, s)
		}
	}

	c := Default()
	set := decode(doc, c, &p)
	if p.has("tokenFile") {
		p.bad["token"] = true // no "token: required" on top of a bad tokenFile
	}

	// Paths whose value came from elsewhere than the key of that name.
	rename := map[string]string{}
	if !set.url {
		if v := strings.TrimSpace(env(EnvURL)); v != "" {
			c.URL, rename["url"] = v, EnvURL
		}
	}
	if !set.token && !set.tokenFile {
		// Trimmed: a Secret made with kubectl --from-file often ends in a newline.
		if v := strings.TrimSpace(env(EnvToken)); v != "" {
			c.Token, rename["token"] = Secret(v), EnvToken
		}
	}
	if !set.insecure {
		if v := env(EnvInsecure); v != "" {
			if b, err := strconv.ParseBool(strings.TrimSpace(v)); err != nil {
				p.add(EnvInsecure, "%s is not a boolean (want true or false)", quote(v))
			} else {
				c.Insecure = b
			}
		}
	}
	for _, name := range []string{EnvUser, EnvPassword} {
		if env(name) != "" {
			p.add(name, "%s", userPasswordMessage)
		}
	}

	if c.TokenFile != "" {
		c.TokenFile = l.resolve(c.TokenFile)
		if set.token {
			p.add("tokenFile", "set either token or tokenFile, not both")
			p.bad["token"] = true
		} else if b, err := l.readFile(c.TokenFile); err != nil {
			p.add("tokenFile", "%v", err)
			p.bad["token"] = true
		} else {
			tok := strings.TrimSpace(string(b))
			secrets = append(secrets, tok)
			if tok == "" {
				p.add("tokenFile", "%s is empty", c.TokenFile)
				p.bad["token"] = true
			}
			c.Token, rename["token"] = Secret(tok), "tokenFile"
		}
	}
	if c.CAFile != "" {
		c.CAFile = l.resolve(c.CAFile)
	}

	c.validate(&p, l.readFile)

	for _, fe := range p.list {
		if to, ok := rename[fe.Path]; ok {
			fe.Path = to
		}
	}
	p.list.redact(secrets)
	p.list.sort()
	if err := p.err(); err != nil {
		return nil, err
	}
	c.URL, _ = normalizeURL(c.URL)
	return c, nil
}

func (l *loader) resolve(name string) string {
	if l.dir == "" || filepath.IsAbs(name) {
		return name
	}
	return filepath.Join(l.dir, name)
}

// parseDoc decodes YAML (a superset of JSON) to a generic map. A file without content is
// an empty map. The second result is false when the file cannot be used at all.
func parseDoc(data []byte, p *problems) (doc map[string]any, ok bool) {
	if len(bytes.TrimSpace(data)) == 0 {
		return map[string]any{}, true
	}
	defer func() {
		// The YAML library re-panics what it does not expect; a config file must not crash
		// the process with a stack trace.
		if r := recover(); r != nil {
			p.add("", "invalid YAML")
			doc, ok = nil, false
		}
	}()
	// Strict: a key given twice is an error, not a silent last-wins.
	j, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		p.add("", "invalid YAML: %s", sanitizeYAMLError(err))
		return nil, false
	}
	var v any
	if err := json.Unmarshal(j, &v); err != nil {
		p.add("", "invalid YAML: %s", sanitizeYAMLError(err))
		return nil, false
	}
	switch v := v.(type) {
	case nil:
		return map[string]any{}, true
	case map[string]any:
		return v, true
	default:
		p.add("", "the file must be a mapping of keys (url: ..., token: ...), not %s", kind(v))
		return nil, false
	}
}

var (
	backticked = regexp.MustCompile("`[^`]*`")
	quotedName = regexp.MustCompile(`'[^']*'`)
	spaces     = regexp.MustCompile(`\s+`)
)

// sanitizeYAMLError removes the values a YAML error may echo (a scalar that does not decode
// as its tag, an anchor name, a non-string map key): the value may be the token. The line
// number stays.
func sanitizeYAMLError(err error) string {
	msg := strings.TrimPrefix(err.Error(), "error converting YAML to JSON: ")
	msg = backticked.ReplaceAllString(msg, "<value hidden>")
	msg = quotedName.ReplaceAllString(msg, "<name hidden>")
	for _, cut := range []string{"invalid map key", "unsupported map key"} {
		if i := strings.Index(msg, cut); i >= 0 {
			msg = msg[:i] + cut + " (keys must be strings)"
		}
	}
	return strings.TrimSpace(spaces.ReplaceAllString(msg, " "))
}

var (
	secretLine = regexp.MustCompile(`(?m)^[\s\-?{,]*["']?(?:token|password)["']?[ \t]*:[ \t]*(.*)$`)
	secretJSON = regexp.MustCompile(`["']?(?:token|password)["']?\s*:\s*(?:"((?:[^"\\]|\\.)*)"|'([^']*)')`)
)

// scanSecrets finds, in the raw text, what looks like the value of a token or password key.
// It serves when the YAML does not parse: the parsed values are added later when it does.
func scanSecrets(data []byte) []string {
	var out []string
	addValue := func(v string) {
		v = strings.TrimSpace(v)
		if i := strings.Index(v, " #"); i >= 0 {
			v = strings.TrimSpace(v[:i])
		}
		out = append(out, v, strings.Trim(v, `"'`))
	}
	for _, m := range secretLine.FindAllSubmatch(data, -1) {
		addValue(string(m[1]))
	}
	for _, m := range secretJSON.FindAllSubmatch(data, -1) {
		out = append(out, string(m[1]), string(m[2]))
	}
	return out
}

// Known keys, in the order they are decoded and reported.
var (
	topKeys = []string{"url", "insecure", "token", "tokenFile", "caFile", "caBundle", "requestTimeout",
		"listTimeout", "inventory", "labels", "addresses", "lifecycle", "username", "password"}
	inventoryKeys = []string{"resyncPeriod", "pollPeriod", "staleAfter"}
	labelsKeys    = []string{"tagLabelPrefixes", "tagTaintPrefixes"}
	addressesKeys = []string{"internalCIDRs", "externalCIDRs"}
	lifecycleKeys = []string{"outOfServiceTaint"}
)

// decode copies the document's values onto c (which holds the defaults), reporting unknown
// keys and type errors. A null value leaves the default; so does "" for url and token,
// which lets the environment fill them.
func decode(doc map[string]any, c *Config, p *problems) fileKeys {
	d := decoder{p: p}
	top := section{m: doc}
	var set fileKeys
	d.unknown(top, topKeys)
	if v, ok := d.str(top, "url"); ok && v != "" {
		c.URL, set.url = v, true
	}
	if v, ok := d.boolean(top, "insecure"); ok {
		c.Insecure, set.insecure = v, true
	}
	if v, ok := d.str(top, "token"); ok && v != "" {
		c.Token, set.token = Secret(v), true
	}
	if v, ok := d.str(top, "tokenFile"); ok && v != "" {
		c.TokenFile, set.tokenFile = v, true
	}
	// A present but ill-typed key is still set: the environment must not paper over it.
	set.url = set.url || p.has("url")
	set.token = set.token || p.has("token")
	set.tokenFile = set.tokenFile || p.has("tokenFile")
	set.insecure = set.insecure || p.has("insecure")

	if v, ok := d.str(top, "caFile"); ok {
		c.CAFile = v
	}
	if v, ok := d.str(top, "caBundle"); ok {
		c.CABundle = v
	}
	d.duration(top, "requestTimeout", &c.RequestTimeout)
	d.duration(top, "listTimeout", &c.ListTimeout)
	for _, k := range []string{"username", "password"} {
		if v, ok := top.get(k); ok && v != "" {
			p.add(k, "%s", userPasswordMessage)
		}
	}

	if s, ok := d.object(top, "inventory", inventoryKeys); ok {
		d.duration(s, "resyncPeriod", &c.Inventory.ResyncPeriod)
		d.duration(s, "pollPeriod", &c.Inventory.PollPeriod)
		d.duration(s, "staleAfter", &c.Inventory.StaleAfter)
	}
	if s, ok := d.object(top, "labels", labelsKeys); ok {
		d.strings(s, "tagLabelPrefixes", &c.Labels.TagLabelPrefixes)
		d.strings(s, "tagTaintPrefixes", &c.Labels.TagTaintPrefixes)
	}
	if s, ok := d.object(top, "addresses", addressesKeys); ok {
		d.strings(s, "internalCIDRs", &c.Addresses.InternalCIDRs)
		d.strings(s, "externalCIDRs", &c.Addresses.ExternalCIDRs)
	}
	if s, ok := d.object(top, "lifecycle", lifecycleKeys); ok {
		if v, ok := d.boolean(s, "outOfServiceTaint"); ok {
			c.Lifecycle.OutOfServiceTaint = v
		}
	}
	return set
}

// section is a map of the document with its key path ("" for the top level).
type section struct {
	m    map[string]any
	path string
}

// get returns the value under key; absent and null are both "not set".
func (s section) get(key string) (any, bool) {
	v, present := s.m[key]
	return v, present && v != nil
}

// decoder reads typed values out of the generic document, naming each key by its full
// path. Its messages never quote the value of a key of the wrong type.
type decoder struct {
	p *problems
}

// object returns the section under key; ok is false when it is absent, null or not a
// mapping (reported). It reports the section's unknown keys.
func (d *decoder) object(s section, key string, known []string) (section, bool) {
	v, ok := s.get(key)
	if !ok {
		return section{}, false
	}
	path := joinPath(s.path, key)
	m, ok := v.(map[string]any)
	if !ok {
		d.p.add(path, "must be a mapping of keys, not %s", kind(v))
		return section{}, false
	}
	sub := section{m: m, path: path}
	d.unknown(sub, known)
	return sub, true
}

// unknown reports every key of s that is not in known, sorted, with a hint when one is close.
func (d *decoder) unknown(s section, known []string) {
	var bad []string
	for k := range s.m {
		if !slices.Contains(known, k) {
			bad = append(bad, k)
		}
	}
	sort.Strings(bad)
	for _, k := range bad {
		msg := "unknown key"
		if s.path == "" && k == "clientTimeout" {
			// The upstream shared library's name for it.
			msg += "; use requestTimeout"
		} else if hint := suggest(k, known); hint != "" {
			msg += fmt.Sprintf(" (did you mean %s?)", hint)
		}
		d.p.add(joinPath(s.path, k), "%s", msg)
	}
}

func (d *decoder) str(s section, key string) (string, bool) {
	v, ok := s.get(key)
	if !ok {
		return "", false
	}
	str, ok := v.(string)
	if !ok {
		d.p.add(joinPath(s.path, key), "must be a string, not %s%s", kind(v), quoteHint(v))
		return "", false
	}
	return str, true
}

func (d *decoder) boolean(s section, key string) (bool, bool) {
	v, ok := s.get(key)
	if !ok {
		return false, false
	}
	b, ok := v.(bool)
	if !ok {
		d.p.add(joinPath(s.path, key), "must be true or false, not %s", kind(v))
		return false, false
	}
	return b, true
}

func (d *decoder) duration(s section, key string, out *time.Duration) {
	v, ok := s.get(key)
	if !ok {
		return
	}
	str, ok := v.(string)
	if !ok {
		d.p.add(joinPath(s.path, key), `must be a duration string such as "30s" or "5m", not %s`, kind(v))
		return
	}
	dur, err := time.ParseDuration(str)
	if err != nil {
		d.p.add(joinPath(s.path, key), `%s is not a duration (use e.g. "30s", "5m", "1h")`, quote(str))
		return
	}
	*out = dur
}

func (d *decoder) strings(s section, key string, out *[]string) {
	v, ok := s.get(key)
	if !ok {
		return
	}
	path := joinPath(s.path, key)
	list, ok := v.([]any)
	if !ok {
		d.p.add(path, "must be a list of strings, not %s", kind(v))
		return
	}
	res := make([]string, 0, len(list))
	good := true
	for i, e := range list {
		str, ok := e.(string)
		if !ok {
			d.p.add(fmt.Sprintf("%s[%d]", path, i), "must be a string, not %s%s", kind(e), quoteHint(e))
			good = false
			continue
		}
		res = append(res, str)
	}
	if good {
		*out = res
	}
}

// kind names a JSON value's type for a message, without its value.
func kind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case float64, json.Number:
		return "a number"
	case string:
		return "a string"
	case []any:
		return "a list"
	case map[string]any:
		return "a mapping"
	default:
		return fmt.Sprintf("%T", v)
	}
}

// quoteHint helps with the YAML trap of a string that looks like a number or boolean.
func quoteHint(v any) string {
	switch v.(type) {
	case bool, float64, json.Number:
		return " (quote the value to make it a string)"
	}
	return ""
}

var plainKey = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// joinPath appends key to path; a key that is not a plain word is quoted.
func joinPath(path, key string) string {
	if !plainKey.MatchString(key) {
		key = quote(key)
	}
	if path == "" {
		return key
	}
	return path + "." + key
}

// suggest returns the known key closest to k (case-insensitive, at most 2 edits), or "".
func suggest(k string, known []string) string {
	best, bestDist := "", 3
	for _, c := range known {
		if d := editDistance(strings.ToLower(k), strings.ToLower(c)); d < bestDist {
			best, bestDist = c, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance of a and b, bounded: long keys are not compared.
func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 1 << 30
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
