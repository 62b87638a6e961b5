package preview

import (
	"encoding/json"
	"math"
	"slices"
	"strconv"

	"github.com/policyrollout/reconciler/internal/jsonenc"
)

// marshalLine encodes line as json.Marshal does, without reflection for
// the values a redacted request holds: at 10 ACTIVE experiments on a
// 100-rule policy, encoding/json was a fifth of the workers' CPU. A value
// of another kind (a time inside attributes) falls back to encoding/json
// for the whole line. TestMarshalLineMatchesEncodingJSON and
// FuzzMarshalLine hold it to json.Marshal's output.
func marshalLine(b []byte, l *LogLine) ([]byte, error) {
	start := len(b)
	b = append(b, `{"time":`...)
	b = jsonenc.AppendString(b, l.Time)
	b = appendField(b, "msg", l.Msg)
	b = appendField(b, "experiment", l.Experiment)
	b = appendField(b, "experiment_etag", l.ExperimentEtag)
	b = appendField(b, "live_etag", l.LiveEtag)
	b = append(b, `,"generation":`...)
	b = strconv.AppendUint(b, l.Generation, 10)
	b = appendField(b, "live_decision", string(l.LiveDecision))
	b = appendField(b, "experiment_decision", string(l.ExperimentDecision))
	b = appendField(b, "live_rule", l.LiveRule)
	b = appendField(b, "experiment_rule", l.ExperimentRule)
	b = append(b, `,"changed":`...)
	b = strconv.AppendBool(b, l.Changed)
	if l.Node != "" {
		b = appendField(b, "node", l.Node)
	}
	b = append(b, `,"request":`...)
	if l.requestJSON != nil {
		return append(append(b, l.requestJSON...), '}'), nil
	}
	b, ok := appendValue(b, l.Request)
	if !ok {
		// A copy, so that l itself never escapes to the heap.
		full, err := json.Marshal(*l)
		return append(b[:start], full...), err
	}
	return append(b, '}'), nil
}

func appendField(b []byte, key, v string) []byte {
	b = append(b, ',', '"')
	b = append(b, key...)
	b = append(b, '"', ':')
	return jsonenc.AppendString(b, v)
}

// appendValue appends v as json.Marshal would, for the kinds a request
// holds; false for any other (b is then undefined).
func appendValue(b []byte, v any) ([]byte, bool) {
	switch x := v.(type) {
	case nil:
		return append(b, "null"...), true
	case string:
		return jsonenc.AppendString(b, x), true
	case bool:
		return strconv.AppendBool(b, x), true
	case int64:
		return strconv.AppendInt(b, x, 10), true
	case float64:
		return appendFloat(b, x)
	case map[string]any:
		if x == nil {
			return append(b, "null"...), true
		}
		return appendObject(b, x, func(b []byte, _ string, v any) ([]byte, bool) { return appendValue(b, v) })
	case []any:
		if x == nil {
			return append(b, "null"...), true
		}
		b = append(b, '[')
		for i, e := range x {
			if i > 0 {
				b = append(b, ',')
			}
			var ok bool
			if b, ok = appendValue(b, e); !ok {
				return b, false
			}
		}
		return append(b, ']'), true
	}
	return b, false
}

// appendFloat formats f as encoding/json's float encoder does: shortest
// form, exponent only below 1e-6 or from 1e21, "e-07" written "e-7".
// NaN and infinities, which json.Marshal refuses, are false.
func appendFloat(b []byte, f float64) ([]byte, bool) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return b, false
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if n := len(b); format == 'e' && n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
		b[n-2] = b[n-1]
		b = b[:n-1]
	}
	return b, true
}

// appendObject appends m as json.Marshal does a map (keys in ascending
// order), each value written by value; false as soon as value declines.
func appendObject[V any](b []byte, m map[string]V, value func(b []byte, key string, v V) ([]byte, bool)) ([]byte, bool) {
	var buf [16]string // keys of a typical request map, on the stack
	keys := buf[:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(jsonenc.AppendString(b, k), ':')
		var ok bool
		if b, ok = value(b, k, m[k]); !ok {
			return b, false
		}
	}
	return append(b, '}'), true
}
