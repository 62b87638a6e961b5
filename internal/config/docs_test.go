package config

import (
	"os"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// TestConfigurationDocMatchesSchema: every key docs/configuration.md
// lists in a section's table is a key of Config, and every key of Config
// is listed there (or, for the fields of an array of tables such as
// [[api.tokens]], named in its row), so the reference is complete and
// never documents a key the loader refuses.
func TestConfigurationDocMatchesSchema(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	rows, mentioned := documentedKeys(string(b))
	schema := map[string]bool{}
	schemaKeys(reflect.TypeOf(Config{}), "", schema)
	if len(rows) < 50 || len(schema) < 50 {
		t.Fatalf("read %d documented keys and %d schema keys; the parser below lost its way", len(rows), len(schema))
	}
	for _, k := range sortedSet(rows) {
		if !schema[k] {
			t.Errorf("docs/configuration.md documents %s, which Config has not (the loader refuses it)", k)
		}
	}
	for _, k := range sortedSet(schema) {
		if !rows[k] && !mentioned[k] {
			t.Errorf("Config has %s, which docs/configuration.md does not document", k)
		}
	}
}

var (
	sectionHeading = regexp.MustCompile("^#{2,3} `\\[(.+)\\]`$")
	backticked     = regexp.MustCompile("`([^`]+)`")
	placeholder    = regexp.MustCompile(`<[a-z]+>`)
)

// documentedKeys reads the key column of every table under a "## `[section]`"
// heading. rows are the dotted keys of the tables; mentioned adds, for a row
// that is itself a table ("[[api.tokens]]", "[groups.<name>]"), the keys
// its description names in backticks. Map keys chosen by the user read
// "*" ("groups.*.subgroups").
func documentedKeys(doc string) (rows, mentioned map[string]bool) {
	rows, mentioned = map[string]bool{}, map[string]bool{}
	section := ""
	for _, line := range strings.Split(doc, "\n") {
		if strings.HasPrefix(line, "#") {
			section = ""
			if m := sectionHeading.FindStringSubmatch(line); m != nil {
				section = placeholder.ReplaceAllString(m[1], "*")
				if strings.HasSuffix(section, ".*") { // a heading of its own: [preview.thresholds.<policy>]
					rows[section] = true
				}
			}
			continue
		}
		if section == "" || !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(line, "|")
		for _, m := range backticked.FindAllStringSubmatch(cells[1], -1) {
			key := placeholder.ReplaceAllString(m[1], "*")
			if table := strings.Trim(key, "[]"); table != key { // a nested table's row
				rows[table] = true
				for _, sub := range backticked.FindAllStringSubmatch(strings.Join(cells[2:], "|"), -1) {
					mentioned[table+"."+sub[1]] = true
				}
				continue
			}
			if section == "groups" { // the rows of [groups.<name>]
				key = "*." + key
			}
			rows[section+"."+key] = true
		}
	}
	return rows, mentioned
}

// schemaKeys adds the dotted TOML keys of t under prefix: a struct's
// fields, a map of tables as "prefix.*" and "prefix.*.field", an array of tables as
// "prefix" and "prefix.field", anything else as a leaf.
func schemaKeys(t reflect.Type, prefix string, out map[string]bool) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name := strings.Split(f.Tag.Get("toml"), ",")[0]
		if name == "" || name == "-" {
			continue
		}
		key := strings.TrimPrefix(prefix+"."+name, ".")
		ft := f.Type
		switch {
		case ft.Kind() == reflect.Struct && ft.Name() != "Duration" && ft.Name() != "Strategy":
			schemaKeys(ft, key, out)
		case ft.Kind() == reflect.Map && ft.Elem().Kind() == reflect.Struct:
			out[key+".*"] = true // the table of one name: [groups.<name>]
			schemaKeys(ft.Elem(), key+".*", out)
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct:
			out[key] = true
			schemaKeys(ft.Elem(), key, out)
		default:
			out[key] = true
		}
	}
}

func sortedSet(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
