package apiv1

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// fill sets every field of v (a pointer) to a non-zero value, down to
// depth levels, so that no omitempty field is left out of its JSON: the
// shape tests then see every field a view can have.
func fill(v any) {
	fillValue(reflect.ValueOf(v).Elem(), 0)
}

var (
	timeType = reflect.TypeOf(time.Time{})
	rawType  = reflect.TypeOf(json.RawMessage(nil))
	rowsType = reflect.TypeOf([]StatusExperiment(nil))
)

func fillValue(v reflect.Value, depth int) {
	if depth > 16 || !v.CanSet() {
		return
	}
	switch {
	case v.Type() == timeType:
		v.Set(reflect.ValueOf(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)))
		return
	case v.Type() == rawType:
		v.SetBytes([]byte(`{"raw":1}`))
		return
	case v.Type() == rowsType:
		// One row of each kind: a row holds one view, never both.
		var b BranchStatus
		var e ExperimentStatus
		fillValue(reflect.ValueOf(&b).Elem(), depth+1)
		fillValue(reflect.ValueOf(&e).Elem(), depth+1)
		b.Kind, e.Kind = KindBranch, KindExperiment // what decides how a row decodes
		v.Set(reflect.ValueOf([]StatusExperiment{{Branch: &b}, {Experiment: &e}}))
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString("x")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(1)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(1)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(0.5)
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		fillValue(p.Elem(), depth+1)
		v.Set(p)
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 1, 1)
		fillValue(s.Index(0), depth+1)
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fillValue(k, depth+1)
		fillValue(e, depth+1)
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			// A field JSON leaves out (a source position, a list's
			// data) cannot come back from JSON: leave it zero.
			if f := v.Type().Field(i); f.IsExported() && f.Tag.Get("json") != "-" {
				fillValue(v.Field(i), depth+1)
			}
		}
	}
}

// keyPaths lists the object keys of a JSON document as dotted paths,
// sorted ("nodes[].status.version"): the shape a client reads.
func keyPaths(data []byte) ([]string, error) {
	var doc any
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	var out []string
	walkKeys(doc, "", &out)
	slices.Sort(out)
	return slices.Compact(out), nil
}

func walkKeys(doc any, prefix string, out *[]string) {
	switch d := doc.(type) {
	case map[string]any:
		for k, v := range d {
			p := k
			if prefix != "" {
				p = prefix + "." + k
			}
			*out = append(*out, p)
			walkKeys(v, p, out)
		}
	case []any:
		for _, v := range d {
			walkKeys(v, prefix+"[]", out)
		}
	}
}

// shapeOf is the key paths of v's JSON, one a line.
func shapeOf(v any) (string, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	paths, err := keyPaths(data)
	return strings.Join(paths, "\n") + "\n", err
}

// views are the API's answers by the name of their golden key list in
// testdata/: the key paths of each answer as it was before the views
// existed (the server rendered the records then), so that the views
// keep the wire format exactly.
func views() map[string]func() any {
	return map[string]func() any{
		"status":            func() any { return &Status{} },
		"node":              func() any { return &Node{} },
		"nodes":             func() any { return &NodeList{} },
		"change_state":      func() any { return &StateChangeList{} },
		"health_check":      func() any { return &HealthReportList{} },
		"generation":        func() any { return &Generation{} },
		"generations":       func() any { return &GenerationList{} },
		"rollback":          func() any { return &Rollback{} },
		"experiment_status": func() any { return &ExperimentStatus{} },
		"branch_status":     func() any { return &BranchStatus{} },
		"experiment":        func() any { return &Experiment{} },
		"experiments":       func() any { return &ExperimentList{} },
		"operation":         func() any { return &Operation{} },
		"operations":        func() any { return &OperationList{} },
		"policy":            func() any { return &Policy{} },
		"policies":          func() any { return &PolicyList{} },
	}
}

// TestShapes: every field of every view has the JSON name it had when the
// server rendered the records themselves (docs/api.md), and every view
// comes back from its JSON unchanged.
func TestShapes(t *testing.T) {
	t.Parallel()
	for name, newView := range views() {
		t.Run(name, func(t *testing.T) {
			v := newView()
			fill(v)
			got, err := shapeOf(v)
			if err != nil {
				t.Fatal(err)
			}
			want, err := os.ReadFile(filepath.Join("testdata", name+".keys"))
			if err != nil {
				t.Fatal(err)
			}
			if got != string(want) {
				t.Errorf("the JSON keys of %s changed:\n%s", name, lineDiff(string(want), got))
			}
			// What the server writes, the CLI reads back whole.
			data, err := json.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			back := newView()
			if err := json.Unmarshal(data, back); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(back, v) {
				t.Errorf("%s did not survive JSON:\nsent %+v\ngot  %+v", name, v, back)
			}
		})
	}
}

// lineDiff names the lines only one of want and got has.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	for _, l := range w {
		if !slices.Contains(g, l) {
			b.WriteString("- " + l + "\n")
		}
	}
	for _, l := range g {
		if !slices.Contains(w, l) {
			b.WriteString("+ " + l + "\n")
		}
	}
	return b.String()
}
