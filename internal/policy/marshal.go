package policy

import (
	"bytes"
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// MarshalTOML renders the merged policy as one policy.toml: the policy keys,
// then [[rules]] in evaluation order and [[tests]] by name, each request as
// an inline table. Loading it back as a policy of the same name gives the
// same etag. The name is not written, since a policy's name is its
// directory's; nor is merge, which has no meaning once merged. The output
// depends only on the content, so equal etags give equal bytes.
//
// We write the document ourselves rather than with toml.Encoder because
// the encoder puts nested tables in [tests.request] sections, and because
// multi-line CEL reads better as a multi-line string.
func (p *Policy) MarshalTOML() ([]byte, error) {
	c := p.canonicalCopy()
	var w tomlWriter
	w.str("description", c.Description, true)
	w.str("default_action", string(c.DefaultAction), false)
	w.str("group", c.Group, false)
	w.str("on_error", string(c.OnError), false)
	for _, r := range c.Rules {
		w.buf.WriteString("\n[[rules]]\n")
		w.str("name", r.Name, false)
		w.line("priority", strconv.FormatInt(r.Priority, 10))
		w.str("action", string(r.Action), false)
		w.str("match", r.Match, false)
		w.str("description", r.Description, true)
		if r.Preview {
			w.line("preview", "true")
		}
	}
	for _, t := range c.Tests {
		w.buf.WriteString("\n[[tests]]\n")
		w.str("name", t.Name, false)
		req, err := inlineValue(t.Request)
		if err != nil {
			return nil, fmt.Errorf("policy: test %q: request: %w", t.Name, err)
		}
		w.line("request", req)
		w.str("expect", string(t.Expect), false)
		if t.Rule != nil {
			w.str("rule", *t.Rule, false)
		}
	}
	return w.buf.Bytes(), nil
}

// tomlWriter accumulates `key = value` lines.
type tomlWriter struct {
	buf bytes.Buffer
}

func (w *tomlWriter) line(key, value string) {
	w.buf.WriteString(key + " = " + value + "\n")
}

// str writes a string key. CEL is full of double quotes, so a value that
// holds some and can be a literal string is written as one. In multi-line
// strings the newline after the opening quotes is not part of the value.
func (w *tomlWriter) str(key, value string, omitEmpty bool) {
	if omitEmpty && value == "" {
		return
	}
	multi := strings.Contains(value, "\n")
	switch {
	case multi && literalOK(value, "'''", "\n\t") && !strings.HasSuffix(value, "'"):
		w.line(key, "'''\n"+value+"'''")
	case multi:
		w.line(key, `"""`+"\n"+escapeString(value, true)+`"""`)
	case strings.Contains(value, `"`) && literalOK(value, "'", "\t"):
		w.line(key, "'"+value+"'")
	default:
		w.line(key, quote(value))
	}
}

// literalOK reports whether s can be written verbatim between delim
// quotes: literal strings have no escapes, so they cannot hold the
// delimiter, control characters other than those allowed, or bad UTF-8.
func literalOK(s, delim, allowed string) bool {
	if strings.Contains(s, delim) || !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if (r < 0x20 || r == 0x7f) && !strings.ContainsRune(allowed, r) {
			return false
		}
	}
	return true
}

// quote renders a TOML basic string.
func quote(s string) string { return `"` + escapeString(s, false) + `"` }

// escapeString escapes s for a basic (or, with multiline, a multi-line
// basic) string. Every quote is escaped, so no run of three can end a
// multi-line string early; invalid UTF-8 becomes U+FFFD, which TOML needs.
func escapeString(s string, multiline bool) string {
	var b strings.Builder
	for i, r := range s {
		if r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD") {
			b.WriteRune(utf8.RuneError)
			continue
		}
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n' && multiline:
			b.WriteByte('\n')
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\u%04X`, r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// bareKey is the syntax of a TOML key that needs no quotes.
var bareKey = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

func tomlKey(k string) string {
	if bareKey.MatchString(k) {
		return k
	}
	return quote(k)
}

// inlineValue renders a normalised request value on one line.
func inlineValue(v any) (string, error) {
	switch x := v.(type) {
	case string:
		return quote(x), nil
	case bool:
		return strconv.FormatBool(x), nil
	case int64:
		return strconv.FormatInt(x, 10), nil
	case float64:
		return formatFloat(x), nil
	case []any:
		return inlineArray(x)
	case map[string]any:
		return inlineTable(x)
	case nil:
		return "", fmt.Errorf("TOML has no null value")
	}
	return "", fmt.Errorf("cannot write %T as TOML", v)
}

// formatFloat writes a float that reads back as a float, not an integer.
func formatFloat(f float64) string {
	switch {
	case math.IsNaN(f):
		return "nan"
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	}
	s := strconv.FormatFloat(f, 'g', -1, 64)
	if !strings.ContainsAny(s, ".en") {
		s += ".0"
	}
	return s
}

func inlineArray(a []any) (string, error) {
	parts := make([]string, len(a))
	for i, e := range a {
		s, err := inlineValue(e)
		if err != nil {
			return "", fmt.Errorf("[%d]: %w", i, err)
		}
		parts[i] = s
	}
	return "[" + strings.Join(parts, ", ") + "]", nil
}

func inlineTable(m map[string]any) (string, error) {
	if len(m) == 0 {
		return "{}", nil
	}
	keys := slices.Sorted(maps.Keys(m))
	parts := make([]string, len(keys))
	for i, k := range keys {
		s, err := inlineValue(m[k])
		if err != nil {
			return "", fmt.Errorf("%s: %w", k, err)
		}
		parts[i] = tomlKey(k) + " = " + s
	}
	return "{ " + strings.Join(parts, ", ") + " }", nil
}
