package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path"
	"strings"

	"go.yaml.in/yaml/v3"
)

// The merge CLI reads policy files in JSON and YAML too (Keystone merges
// policy.json and policy.yaml files): the same schema as the TOML files,
// decoded into the map the TOML decoder makes, so that one walker checks
// them all. Policy trees (Load) stay TOML: an API commit edits the lines
// of the TOML file that defines a rule, which no other format offers.

// docFormat is the syntax of a policy file, chosen by its extension.
type docFormat string

const (
	formatTOML docFormat = "TOML"
	formatJSON docFormat = "JSON"
	formatYAML docFormat = "YAML"
)

// formatOf is the format of a merge input by its extension; every other
// file is TOML.
func formatOf(name string, kind fileKind) docFormat {
	if kind != kindMerge && kind != kindMergeTree {
		return formatTOML
	}
	switch strings.ToLower(path.Ext(name)) {
	case ".json":
		return formatJSON
	case ".yaml", ".yml":
		return formatYAML
	}
	return formatTOML
}

// outputOnlyKeys are keys of `reconciler merge --format json` (the
// canonical form) that describe a policy rather than define it: a file
// may carry them, and they are ignored, so that merge reads its own
// output.
var outputOnlyKeys = []string{"name", "lists"}

// parseData decodes a JSON or YAML document into TOML's shapes: integers
// as int64, other numbers as float64, objects as map[string]any. The
// line of a syntax error is returned when the parser gives one.
func parseData(format docFormat, data []byte) (map[string]any, int, error) {
	var doc any
	var line int
	var err error
	switch format {
	case formatJSON:
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		if err = dec.Decode(&doc); err == nil && dec.More() {
			err = errors.New("data after the JSON object")
		}
		var se *json.SyntaxError
		if errors.As(err, &se) {
			line = 1 + bytes.Count(data[:min(int(se.Offset), len(data))], []byte("\n"))
		}
	case formatYAML:
		err = yamlDecode(data, &doc)
	}
	if err != nil {
		return nil, line, err
	}
	top, ok := normalize(doc).(map[string]any)
	if !ok {
		return nil, 1, fmt.Errorf("the document must be an object of policy keys, not %s", typeName(normalize(doc)))
	}
	for _, k := range outputOnlyKeys {
		delete(top, k)
	}
	return top, 0, nil
}

// yamlDecode decodes one YAML document; the parser's panics (it has had
// some on hostile input) become errors, as parseTOML's do.
func yamlDecode(data []byte, v any) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("yaml parser failed: %v", r)
		}
	}()
	return yaml.Unmarshal(data, v)
}

// normalize gives decoded JSON and YAML values the types the TOML decoder
// gives: int64 for integers, float64 for other numbers, map[string]any
// for objects (YAML keys that are not strings are written as strings).
func normalize(v any) any {
	switch x := v.(type) {
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		f, _ := x.Float64()
		return f
	case int:
		return int64(x)
	case uint64:
		if x <= math.MaxInt64 {
			return int64(x)
		}
		return float64(x)
	case map[string]any:
		for k, e := range x {
			x[k] = normalize(e)
		}
		return x
	case map[any]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[fmt.Sprint(k)] = normalize(e)
		}
		return m
	case []any:
		for i, e := range x {
			x[i] = normalize(e)
		}
		return x
	}
	return v
}
