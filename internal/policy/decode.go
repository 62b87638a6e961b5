package policy

import (
	"bytes"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
)

// We decode each file into a generic map and check its shape ourselves,
// rather than into tagged structs with MetaData.Undecoded: a typed decode
// stops at the first type mismatch, and toml v1.6 cannot say which [[rules]]
// element a problem is in. Walking the map lets us report every problem in
// a file, each at the line of the rule (or key) it is about.

// fileKind says which top-level keys a file may hold.
type fileKind int

const (
	kindFragment  fileKind = iota // fragments and included files
	kindPolicy                    // policy.toml
	kindMerge                     // a MergeFiles input: policy keys, no include
	kindMergeTree                 // a MergePaths input: policy keys and include
)

// settingKeys are the policy-level keys, in the order they are written.
var settingKeys = []string{"description", "default_action", "group", "on_error"}

// setting is one policy-level value and where it was set.
type setting struct {
	value string
	file  string
	line  int
}

// include is one entry of a policy.toml `include` list.
type include struct {
	path string
	line int
}

// parsedFile is one file's contribution to a policy, before merging.
type parsedFile struct {
	name     string
	merge    Strategy // "" when the file sets none
	settings map[string]setting
	present  map[string]bool // policy keys written, even with a bad value
	includes []include
	rules    []Rule
	tests    []Test
	broken   bool // did not parse, so what it defines is unknown
}

// fileDecoder checks one decoded document against the policy format.
type fileDecoder struct {
	errorSink
	name string
	kind fileKind
	lay  *layout
	out  *parsedFile
}

// decodeFile parses one TOML file. It returns whatever it could read even
// when there are problems, so that merging can still report conflicts.
func decodeFile(name string, data []byte, kind fileKind) (*parsedFile, ErrorList) {
	d := &fileDecoder{name: name, kind: kind, out: &parsedFile{name: name, settings: map[string]setting{}, present: map[string]bool{}}}
	if line, msg := checkBudget(data); msg != "" {
		d.add(name, line, "", "%s", msg)
		d.out.broken = true
		return d.out, d.errs
	}
	format := formatOf(name, kind)
	doc, line, err := parseDoc(format, data)
	if err != nil {
		d.add(name, line, "", "invalid %s: %s", format, err)
		d.out.broken = true
		return d.out, d.errs
	}
	d.lay = scanLayout(nil) // JSON and YAML give no lines
	if format == formatTOML {
		d.lay = scanLayout(data)
	}
	for _, key := range d.keysByLine(doc) {
		d.topKey(key, doc[key])
	}
	return d.out, d.errs
}

// parseDoc decodes a document of format into a map; for an error it
// gives the line when known and the parser's message.
func parseDoc(format docFormat, data []byte) (map[string]any, int, error) {
	if format != formatTOML {
		return parseData(format, data)
	}
	doc, err := parseTOML(data)
	if err != nil {
		return nil, parseErrorLine(data, err), errors.New(parseErrorMsg(err))
	}
	return doc, 0, nil
}

// parseTOML decodes a document into a map. The recover turns a panic in
// the TOML library into an error, so that no file can crash the reconciler.
func parseTOML(data []byte) (doc map[string]any, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("toml parser failed: %v", r)
		}
	}()
	doc = map[string]any{}
	_, err = toml.Decode(string(data), &doc)
	return doc, err
}

// parseErrorLine is the line of a syntax error. toml v1.6 counts the line
// after a token that ends at a newline (`[[rules]` then "\n" is reported on
// the next line), so we also count from the error's byte offset and take
// the earlier of the two.
func parseErrorLine(data []byte, err error) int {
	var pe toml.ParseError
	if !errors.As(err, &pe) {
		return 0
	}
	line := pe.Position.Line
	if start := pe.Position.Start; start >= 0 && start <= len(data) {
		if l := bytes.Count(data[:start], []byte("\n")) + 1; line <= 0 || l < line {
			line = l
		}
	}
	return line
}

func parseErrorMsg(err error) string {
	var pe toml.ParseError
	if errors.As(err, &pe) {
		return pe.Message
	}
	return err.Error()
}

// keysByLine orders a map's keys as they appear in the file, so that
// problems are reported in reading order, not in map order.
func (d *fileDecoder) keysByLine(doc map[string]any) []string {
	keys := make([]string, 0, len(doc))
	for k := range doc {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		li, lj := d.lay.topLine(keys[i]), d.lay.topLine(keys[j])
		if li != lj {
			return li < lj
		}
		return keys[i] < keys[j]
	})
	return keys
}

// allowed reports whether a top-level key may appear in this kind of file.
func (d *fileDecoder) allowed(key string) bool {
	switch key {
	case "rules", "tests", "merge":
		return true
	case "include":
		return d.kind == kindPolicy || d.kind == kindMergeTree
	case "description", "default_action", "group", "on_error":
		return d.kind != kindFragment
	}
	return false
}

func (d *fileDecoder) topKey(key string, v any) {
	line := d.lay.topLine(key)
	if !d.allowed(key) {
		d.add(d.name, line, "", "unknown key %q%s", key, d.unknownHint(key))
		return
	}
	switch key {
	case "rules":
		d.eachElement("rules", v, d.rule)
	case "tests":
		d.eachElement("tests", v, d.test)
	case "merge":
		if s, ok := d.enum(line, subject{}, key, v, "fail", "override", "maintain"); ok {
			d.out.merge = Strategy(s)
		}
	case "include":
		d.includes(line, v)
	default:
		d.out.present[key] = true
		d.setting(key, line, v)
	}
}

// unknownHint says why a policy key is refused in a fragment, because that
// is the usual cause: a fragment cannot change policy-level settings.
func (d *fileDecoder) unknownHint(key string) string {
	switch {
	case d.kind == kindFragment && (key == "include" || key == "default_action" ||
		key == "description" || key == "group" || key == "on_error"):
		return " (only policy.toml may set it; fragments hold rules, tests and merge)"
	case d.kind == kindMerge && key == "include":
		return " (merge does not follow includes; list the files instead)"
	}
	return ""
}

func (d *fileDecoder) setting(key string, line int, v any) {
	var val string
	var ok bool
	switch key {
	case "default_action":
		val, ok = d.enum(line, subject{}, key, v, "allow", "deny")
	case "on_error":
		val, ok = d.enum(line, subject{}, key, v, "deny", "allow", "skip")
	default:
		val, ok = d.str(line, subject{}, key, v)
		val = strings.TrimSpace(val)
		if ok && key == "group" && val == "" {
			d.add(d.name, line, "", "group must not be empty")
			ok = false
		}
	}
	if ok {
		d.out.settings[key] = setting{value: val, file: d.name, line: line}
	}
}

func (d *fileDecoder) includes(line int, v any) {
	list, ok := v.([]any)
	if !ok {
		d.add(d.name, line, "", "include must be an array of strings, not %s", typeName(v))
		return
	}
	for _, item := range list {
		s, ok := item.(string)
		if !ok || s == "" {
			d.add(d.name, line, "", "include entries must be non-empty strings, not %s", typeName(item))
			continue
		}
		d.out.includes = append(d.out.includes, include{path: s, line: line})
	}
}

// eachElement checks that v is an array of tables and decodes each one.
func (d *fileDecoder) eachElement(array string, v any, decode func(int, map[string]any, *element)) {
	var tables []map[string]any
	switch list := v.(type) {
	case []map[string]any:
		tables = list
	case []any:
		for _, item := range list {
			t, _ := item.(map[string]any)
			tables = append(tables, t)
		}
	default:
		d.add(d.name, d.lay.topLine(array), "", "%s must be an array of tables ([[%s]]), not %s", array, array, typeName(v))
		return
	}
	for i, t := range tables {
		el := d.lay.element(array, i)
		if t == nil {
			d.add(d.name, el.line, "", "%s[%d] must be a table", array, i)
			continue
		}
		decode(i, t, el)
	}
}

// subject is what a message is about: nothing (a top-level key), a rule
// or a test. Messages start with it so that they read on their own.
type subject struct {
	prefix string // `rule "x": `, `test "y": ` or ""
	rule   string // the rule's name, for Error.Rule
}

// str reads a string value.
func (d *fileDecoder) str(line int, subj subject, key string, v any) (string, bool) {
	s, ok := v.(string)
	if !ok {
		d.add(d.name, line, subj.rule, "%s%s must be a string, not %s", subj.prefix, key, typeName(v))
	}
	return s, ok
}

// enum reads a string value that must be one of choices.
func (d *fileDecoder) enum(line int, subj subject, key string, v any, choices ...string) (string, bool) {
	s, ok := d.str(line, subj, key, v)
	if !ok {
		return "", false
	}
	for _, c := range choices {
		if s == c {
			return s, true
		}
	}
	d.add(d.name, line, subj.rule, "%s%s must be %s, not %q", subj.prefix, key, quoteChoices(choices), s)
	return "", false
}

func quoteChoices(choices []string) string {
	q := make([]string, len(choices))
	for i, c := range choices {
		q[i] = fmt.Sprintf("%q", c)
	}
	if len(q) == 1 {
		return q[0]
	}
	return strings.Join(q[:len(q)-1], ", ") + " or " + q[len(q)-1]
}

// typeName names a decoded TOML value's type in the words of the TOML spec.
func typeName(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case int64:
		return "an integer"
	case float64:
		return "a float"
	case bool:
		return "a boolean"
	case time.Time:
		return "a datetime"
	case []any, []map[string]any:
		return "an array"
	case map[string]any:
		return "a table"
	}
	return fmt.Sprintf("%T", v)
}
