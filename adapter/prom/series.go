package prom

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"

	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
)

// decodeSeries reads an /api/v1/series response token by token and keeps
// only the distinct (name, label names) pairs: label values are read and
// dropped at once, so a response of a million series costs the memory of
// its few hundred shapes, not of its label sets.
func decodeSeries(resp *http.Response) ([]Shape, error) {
	dec := json.NewDecoder(resp.Body)
	shapes, status, errType, errMsg, err := decodeSeriesBody(dec)
	if err != nil || status != "success" {
		if status == "error" {
			return nil, &promv1.Error{Type: promv1.ErrorType(errType), Msg: errMsg}
		}
		typ := promv1.ErrBadResponse
		switch {
		case resp.StatusCode/100 == 5:
			typ = promv1.ErrServer
		case resp.StatusCode/100 == 4:
			typ = promv1.ErrClient
		}
		if err == nil {
			err = fmt.Errorf("status %q", status)
		}
		return nil, &promv1.Error{Type: typ, Msg: fmt.Sprintf("HTTP %s: cannot decode the series response: %v", resp.Status, err)}
	}
	return shapes, nil
}

func decodeSeriesBody(dec *json.Decoder) (shapes []Shape, status, errType, errMsg string, err error) {
	if err := expectDelim(dec, '{'); err != nil {
		return nil, "", "", "", err
	}
	seen := map[string]bool{}
	intern := map[string]string{}
	for dec.More() {
		key, err := stringToken(dec)
		if err != nil {
			return nil, status, errType, errMsg, err
		}
		switch key {
		case "status":
			status, err = stringToken(dec)
		case "errorType":
			errType, err = stringToken(dec)
		case "error":
			errMsg, err = stringToken(dec)
		case "data":
			shapes, err = decodeSeriesData(dec, seen, intern, shapes)
		default:
			var skip json.RawMessage
			err = dec.Decode(&skip)
		}
		if err != nil {
			return nil, status, errType, errMsg, err
		}
	}
	return shapes, status, errType, errMsg, expectDelim(dec, '}')
}

func decodeSeriesData(dec *json.Decoder, seen map[string]bool, intern map[string]string, shapes []Shape) ([]Shape, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if tok == nil {
		return shapes, nil
	}
	if d, ok := tok.(json.Delim); !ok || d != '[' {
		return nil, fmt.Errorf("data is %v, want a list", tok)
	}
	var labels []string
	for dec.More() {
		if err := expectDelim(dec, '{'); err != nil {
			return nil, err
		}
		name := ""
		labels = labels[:0]
		for dec.More() {
			k, err := stringToken(dec)
			if err != nil {
				return nil, err
			}
			v, err := stringToken(dec)
			if err != nil {
				return nil, err
			}
			if k == "__name__" {
				name = v
				continue
			}
			labels = append(labels, k)
		}
		if err := expectDelim(dec, '}'); err != nil {
			return nil, err
		}
		sort.Strings(labels)
		key := name + "\x00" + strings.Join(labels, "\x00")
		if seen[key] {
			continue
		}
		seen[key] = true
		s := Shape{Name: internString(intern, name), Labels: make([]string, len(labels))}
		for i, l := range labels {
			s.Labels[i] = internString(intern, l)
		}
		shapes = append(shapes, s)
	}
	return shapes, expectDelim(dec, ']')
}

func internString(m map[string]string, s string) string {
	if v, ok := m[s]; ok {
		return v
	}
	m[s] = s
	return s
}

func expectDelim(dec *json.Decoder, want json.Delim) error {
	tok, err := dec.Token()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return io.ErrUnexpectedEOF
		}
		return err
	}
	if d, ok := tok.(json.Delim); !ok || d != want {
		return fmt.Errorf("got %v, want %q", tok, want)
	}
	return nil
}

func stringToken(dec *json.Decoder) (string, error) {
	tok, err := dec.Token()
	if err != nil {
		return "", err
	}
	s, ok := tok.(string)
	if !ok {
		return "", fmt.Errorf("got %v, want a string", tok)
	}
	return s, nil
}
