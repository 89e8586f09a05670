package diagnose

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/config"
)

// Status is the outcome of one check.
type Status string

// Statuses, as -o json writes them.
const (
	OK      Status = "ok"
	Failed  Status = "failed"
	Warning Status = "warning"
	// Info is a fact, not a check: explain's lines about what the controller knows.
	Info Status = "info"
)

// symbols are the marks of the text output.
var symbols = map[Status]string{OK: "✔", Failed: "✘", Warning: "‼", Info: "·"}

// colours are the ANSI colours of the marks on a terminal.
var colours = map[Status]string{OK: "\x1b[32m", Failed: "\x1b[31m", Warning: "\x1b[33m", Info: ""}

// Line is one check, or one fact, and the fix of a failure or a warning.
type Line struct {
	Status  Status `json:"status"`
	Message string `json:"message"`
	Fix     string `json:"fix,omitempty"`
}

// Section groups the lines about one part of the installation.
type Section struct {
	Name  string `json:"name"`
	Lines []Line `json:"checks"`
}

// Report is what check or explain found, section by section.
type Report struct {
	Command  string     `json:"command"`
	Sections []*Section `json:"sections"`
	Failed   int        `json:"failed"`
	Warnings int        `json:"warnings"`
	// secrets are the tokens the report must never show (config.Redacted replaces them).
	secrets []string
}

// Section returns the section of this name, added at the end on first use.
func (r *Report) Section(name string) *Section {
	for _, s := range r.Sections {
		if s.Name == name {
			return s
		}
	}
	s := &Section{Name: name}
	r.Sections = append(r.Sections, s)
	return s
}

// add appends a line to the named section and counts it.
func (r *Report) add(section string, l Line) {
	switch l.Status {
	case Failed:
		r.Failed++
	case Warning:
		r.Warnings++
	}
	s := r.Section(section)
	s.Lines = append(s.Lines, l)
}

// ok, fail, warn and info add a line of that status to section.
func (r *Report) ok(section, format string, args ...any) {
	r.add(section, Line{Status: OK, Message: fmt.Sprintf(format, args...)})
}

func (r *Report) fail(section, msg, fix string) {
	r.add(section, Line{Status: Failed, Message: msg, Fix: fix})
}

func (r *Report) warn(section, msg, fix string) {
	r.add(section, Line{Status: Warning, Message: msg, Fix: fix})
}

func (r *Report) info(section, format string, args ...any) {
	r.add(section, Line{Status: Info, Message: fmt.Sprintf(format, args...)})
}

// hide adds secrets the report must never show.
func (r *Report) hide(secrets ...string) {
	for _, s := range secrets {
		if len(s) >= 3 && !slices.Contains(r.secrets, s) {
			r.secrets = append(r.secrets, s)
		}
	}
}

// redacted returns a copy of the report with every known secret replaced by config.Redacted:
// messages are written not to hold the token, and XO's errors never do; this is the last line
// of defence, as config's own redaction is for its errors.
func (r *Report) redacted() *Report {
	var pairs []string
	for _, s := range r.secrets {
		pairs = append(pairs, s, config.Redacted)
	}
	rep := strings.NewReplacer(pairs...)
	out := *r
	out.Sections = make([]*Section, len(r.Sections))
	for i, s := range r.Sections {
		c := &Section{Name: s.Name, Lines: make([]Line, len(s.Lines))}
		for j, l := range s.Lines {
			c.Lines[j] = Line{Status: l.Status, Message: rep.Replace(l.Message), Fix: rep.Replace(l.Fix)}
		}
		out.Sections[i] = c
	}
	return &out
}

// WriteJSON writes the report as one JSON document.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r.redacted())
}

// WriteText writes the report for people: each section's name, then one line per check with
// its mark, the fix of a failure or a warning on the line after it, and a summary. colour adds
// ANSI colours (on a terminal only).
func (r *Report) WriteText(w io.Writer, colour bool) error {
	paint := func(s Status, text string) string {
		if !colour || colours[s] == "" {
			return text
		}
		return colours[s] + text + "\x1b[0m"
	}
	bold := func(text string) string {
		if !colour {
			return text
		}
		return "\x1b[1m" + text + "\x1b[0m"
	}
	var b strings.Builder
	for i, s := range r.redacted().Sections {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(bold(s.Name) + "\n")
		for _, l := range s.Lines {
			fmt.Fprintf(&b, "  %s %s\n", paint(l.Status, symbols[l.Status]), indent(l.Message, "    "))
			if l.Fix != "" {
				fmt.Fprintf(&b, "      fix: %s\n", indent(l.Fix, "           "))
			}
		}
	}
	b.WriteByte('\n')
	switch {
	case r.Failed > 0:
		fmt.Fprintf(&b, "%s %s: %d failed, %d warning(s)\n", paint(Failed, symbols[Failed]), r.Command, r.Failed, r.Warnings)
	case r.Warnings > 0:
		fmt.Fprintf(&b, "%s %s: nothing failed, %d warning(s)\n", paint(Warning, symbols[Warning]), r.Command, r.Warnings)
	default:
		fmt.Fprintf(&b, "%s %s: everything is fine\n", paint(OK, symbols[OK]), r.Command)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// indent indents the lines of s after the first by prefix.
func indent(s, prefix string) string {
	return strings.ReplaceAll(s, "\n", "\n"+prefix)
}
