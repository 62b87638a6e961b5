package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// errTooDeep and errTooMany are the attribute limits; they are wrapped
// into ErrBadRequest by the callers, which name the field.
var (
	errTooDeep = fmt.Errorf("nested deeper than %d levels", MaxAttributeDepth)
	errTooMany = fmt.Errorf("more than %d values", MaxAttributeValues)
)

// decodeJSONValue reads one JSON value token by token, so that depth and
// size are checked while reading rather than after encoding/json has
// already built (and recursed through) an arbitrarily deep structure.
func decodeJSONValue(dec *json.Decoder, depth int, count *int) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, fmt.Errorf("malformed JSON: %v", err)
	}
	if *count++; *count > MaxAttributeValues {
		return nil, errTooMany
	}
	d, isDelim := tok.(json.Delim)
	if !isDelim {
		return tok, nil // string, float64, bool or nil
	}
	if depth > MaxAttributeDepth {
		return nil, errTooDeep
	}
	switch d {
	case '{':
		return decodeJSONObject(dec, depth, count)
	case '[':
		return decodeJSONArray(dec, depth, count)
	}
	return nil, errors.New("malformed JSON")
}

func decodeJSONObject(dec *json.Decoder, depth int, count *int) (map[string]any, error) {
	m := map[string]any{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("malformed JSON: %v", err)
		}
		key := tok.(string)
		if _, dup := m[key]; dup {
			return nil, errors.New("a key is given twice")
		}
		if m[key], err = decodeJSONValue(dec, depth+1, count); err != nil {
			return nil, err
		}
	}
	_, err := dec.Token() // '}'
	return m, err
}

func decodeJSONArray(dec *json.Decoder, depth int, count *int) ([]any, error) {
	l := []any{}
	for dec.More() {
		v, err := decodeJSONValue(dec, depth+1, count)
		if err != nil {
			return nil, err
		}
		l = append(l, v)
	}
	_, err := dec.Token() // ']'
	return l, err
}

// asAttributes copies attributes given as Go values (a policy test's TOML
// table) into the JSON-like shapes CEL adapts, checking the same limits.
func asAttributes(key string, v any) (map[string]any, error) {
	if _, ok := v.(map[string]any); !ok {
		return nil, badRequest(key, "must be an object, not %s", typeName(v))
	}
	out, err := copyAttribute(v, 1, new(int))
	if err != nil {
		return nil, badRequest(key, "%v", err)
	}
	return out.(map[string]any), nil
}

func copyAttribute(v any, depth int, count *int) (any, error) {
	if *count++; *count > MaxAttributeValues {
		return nil, errTooMany
	}
	switch x := v.(type) {
	case nil, string, bool, float64, int64, time.Time:
		return x, nil
	case int:
		return int64(x), nil
	case map[string]any:
		return copyAttributeMap(x, depth, count)
	case []any:
		return copyAttributeList(x, depth, count)
	case []map[string]any: // TOML arrays of tables
		l := make([]any, len(x))
		for i, e := range x {
			l[i] = e
		}
		return copyAttributeList(l, depth, count)
	}
	return nil, fmt.Errorf("unsupported value of type %T", v)
}

func copyAttributeMap(m map[string]any, depth int, count *int) (any, error) {
	if depth > MaxAttributeDepth {
		return nil, errTooDeep
	}
	out := make(map[string]any, len(m))
	for k, e := range m {
		c, err := copyAttribute(e, depth+1, count)
		if err != nil {
			return nil, err
		}
		out[k] = c
	}
	return out, nil
}

func copyAttributeList(l []any, depth int, count *int) (any, error) {
	if depth > MaxAttributeDepth {
		return nil, errTooDeep
	}
	out := make([]any, len(l))
	for i, e := range l {
		c, err := copyAttribute(e, depth+1, count)
		if err != nil {
			return nil, err
		}
		out[i] = c
	}
	return out, nil
}
