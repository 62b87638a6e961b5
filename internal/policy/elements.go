package policy

import (
	"fmt"
	"sort"
	"strings"
)

// The keys a rule and a test may hold.
var (
	ruleKeys = map[string]bool{"name": true, "priority": true, "action": true, "match": true, "description": true,
		"preview": true}
	testKeys = map[string]bool{"name": true, "request": true, "expect": true, "rule": true}
)

// Problems about a rule or test are reported at the line of its [[rules]] or
// [[tests]] header (Pos), so that every message about one rule points at the
// same place; only unknown keys point at their own line.

// rule decodes the i-th [[rules]] table of the file.
func (d *fileDecoder) rule(i int, t map[string]any, el *element) {
	r := Rule{Pos: Pos{File: d.name, Line: el.line}}
	subj := subject{prefix: fmt.Sprintf("rule #%d: ", i+1)}
	if name, ok := d.elementName(t, el, subj); ok {
		r.Name = name
		subj = subject{prefix: fmt.Sprintf("rule %q: ", name), rule: name}
	}
	d.unknownKeys(t, el, subj, ruleKeys)
	line := el.line
	if v, ok := d.required(t, line, subj, "priority"); ok {
		if p, isInt := v.(int64); isInt {
			r.Priority = p
		} else {
			d.add(d.name, line, subj.rule, "%spriority must be an integer, not %s", subj.prefix, typeName(v))
		}
	}
	if v, ok := d.required(t, line, subj, "action"); ok {
		a, _ := d.enum(line, subj, "action", v, "allow", "deny")
		r.Action = Action(a)
	}
	if v, ok := d.required(t, line, subj, "match"); ok {
		if m, ok := d.str(line, subj, "match", v); ok {
			r.Match = strings.TrimSpace(m)
			if r.Match == "" {
				d.add(d.name, line, subj.rule, "%smatch must not be empty", subj.prefix)
			}
		}
	}
	if v, ok := t["description"]; ok {
		desc, _ := d.str(line, subj, "description", v)
		r.Description = strings.TrimSpace(desc)
	}
	if v, ok := t["preview"]; ok {
		if b, isBool := v.(bool); isBool {
			r.Preview = b
		} else {
			d.add(d.name, line, subj.rule, "%spreview must be a boolean, not %s", subj.prefix, typeName(v))
		}
	}
	if r.Name != "" {
		d.out.rules = append(d.out.rules, r)
	}
}

// test decodes the i-th [[tests]] table of the file.
func (d *fileDecoder) test(i int, t map[string]any, el *element) {
	tc := Test{Pos: Pos{File: d.name, Line: el.line}}
	subj := subject{prefix: fmt.Sprintf("test #%d: ", i+1)}
	if name, ok := d.elementName(t, el, subj); ok {
		tc.Name = name
		subj = subject{prefix: fmt.Sprintf("test %q: ", name)}
	}
	d.unknownKeys(t, el, subj, testKeys)
	line := el.line
	if v, ok := d.required(t, line, subj, "request"); ok {
		tc.Request = d.request(line, subj, v)
	}
	if v, ok := d.required(t, line, subj, "expect"); ok {
		e, _ := d.enum(line, subj, "expect", v, "allow", "deny")
		tc.Expect = Action(e)
	}
	if v, ok := t["rule"]; ok {
		if r, ok := d.str(line, subj, "rule", v); ok {
			tc.Rule = &r
		}
	}
	if tc.Name != "" {
		d.out.tests = append(d.out.tests, tc)
	}
}

// elementName reads the required, non-empty name of a rule or test.
func (d *fileDecoder) elementName(t map[string]any, el *element, subj subject) (string, bool) {
	v, ok := d.required(t, el.line, subj, "name")
	if !ok {
		return "", false
	}
	s, ok := d.str(el.line, subj, "name", v)
	if ok && s == "" {
		d.add(d.name, el.line, "", "%sname must not be empty", subj.prefix)
		return "", false
	}
	return s, ok
}

// required looks a key up and reports it missing. Absence is a problem
// even for priority, where 0 would be a valid value.
func (d *fileDecoder) required(t map[string]any, line int, subj subject, key string) (any, bool) {
	v, ok := t[key]
	if !ok {
		d.add(d.name, line, subj.rule, "%s%s is required", subj.prefix, key)
	}
	return v, ok
}

// unknownKeys reports keys outside known, each at its own line.
func (d *fileDecoder) unknownKeys(t map[string]any, el *element, subj subject, known map[string]bool) {
	var unknown []string
	for k := range t {
		if !known[k] {
			unknown = append(unknown, k)
		}
	}
	sort.Slice(unknown, func(i, j int) bool {
		li, lj := el.keyLine(unknown[i]), el.keyLine(unknown[j])
		return li < lj || li == lj && unknown[i] < unknown[j]
	})
	for _, k := range unknown {
		d.add(d.name, el.keyLine(k), subj.rule, "%sunknown key %q", subj.prefix, k)
	}
}

// request checks that a test request is a table whose values JSON can hold,
// and normalises it, since requests are JSON everywhere else.
func (d *fileDecoder) request(line int, subj subject, v any) map[string]any {
	m, ok := v.(map[string]any)
	if !ok {
		d.add(d.name, line, "", "%srequest must be a table, not %s", subj.prefix, typeName(v))
		return nil
	}
	if where, bad := nonFinite(m, "request"); bad {
		d.add(d.name, line, "", "%s%s: nan and inf cannot be sent in a JSON request", subj.prefix, where)
	}
	return normalizeMap(m)
}
