package seriesjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"runtime"
	"sort"
	"strings"
	"testing"
	"testing/iotest"
)

var seriesCases = []struct {
	name       string
	body       string
	want       []Shape // nil: no series
	wantStatus string
	wantErr    string // a substring of the error; "" for none
}{
	{
		name:       "Prometheus response",
		body:       `{"status":"success","data":[{"__name__":"up","job":"a","instance":"x:1"},{"__name__":"up","instance":"y:1","job":"b"},{"__name__":"http_total","code":"200"}]}`,
		want:       []Shape{{"up", []string{"instance", "job"}}, {"http_total", []string{"code"}}},
		wantStatus: "success",
	},
	{
		name:       "empty result",
		body:       `{"status":"success","data":[]}`,
		wantStatus: "success",
	},
	{
		name:       "null data",
		body:       `{"status":"success","data":null}`,
		wantStatus: "success",
	},
	{
		name:       "no data",
		body:       `{"status":"success"}`,
		wantStatus: "success",
	},
	{
		name:       "escapes in label values are skipped",
		body:       `{"status":"success","data":[{"__name__":"up","pod":"a\"b\\c\/d\b\f\n\r\t\u00e9\uD83D\uDE00}"}]}`,
		want:       []Shape{{"up", []string{"pod"}}},
		wantStatus: "success",
	},
	{
		name:       "escaped label names and __name__ key are unescaped",
		body:       `{"status":"success","data":[{"\u005f_name__":"up","\u006eamespace":"a","po\u0064":"b"}]}`,
		want:       []Shape{{"up", []string{"namespace", "pod"}}},
		wantStatus: "success",
	},
	{
		name:       "escaped metric name",
		body:       `{"status":"success","data":[{"__name__":"caf\u00e9_\"total\"_\ud83d\ude00"}]}`,
		want:       []Shape{{"café_\"total\"_😀", []string{}}},
		wantStatus: "success",
	},
	{
		name:       "UTF-8 names and values",
		body:       `{"status":"success","data":[{"__name__":"métrique_total","pod":"pöd-日本","zône":"ß"}]}`,
		want:       []Shape{{"métrique_total", []string{"pod", "zône"}}},
		wantStatus: "success",
	},
	{
		name:       "invalid UTF-8 in a name becomes U+FFFD, as encoding/json does",
		body:       "{\"status\":\"success\",\"data\":[{\"__name__\":\"a\xffb\",\"pod\":\"\xfe\"}]}",
		want:       []Shape{{"a\ufffdb", []string{"pod"}}},
		wantStatus: "success",
	},
	{
		name:       "unsorted and repeated labels",
		body:       `{"status":"success","data":[{"pod":"1","__name__":"x","ns":"2","pod":"3"},{"ns":"1","pod":"2","__name__":"x"}]}`,
		want:       []Shape{{"x", []string{"ns", "pod"}}},
		wantStatus: "success",
	},
	{
		name:       "a name containing a separator is not confused with a label",
		body:       `{"status":"success","data":[{"__name__":"a\u0000b"},{"__name__":"a","b":""}]}`,
		want:       []Shape{{"a\x00b", []string{}}, {"a", []string{"b"}}},
		wantStatus: "success",
	},
	{
		name:       "series without __name__",
		body:       `{"status":"success","data":[{"job":"a"},{}]}`,
		want:       []Shape{{"", []string{"job"}}, {"", []string{}}},
		wantStatus: "success",
	},
	{
		name: "whitespace, warnings and unknown keys",
		body: "{ \"warnings\" : [\"w\", {\"a\":[1,-2.5e+3,0.1E-2,true,false,null,{}]}] ,\n\t\"status\" : \"success\" , \"infos\":[] ,\r\n" +
			"\"data\" : [ { \"__name__\" : \"up\" , \"job\" : \"a\" } ] }\n",
		want:       []Shape{{"up", []string{"job"}}},
		wantStatus: "success",
	},
	{
		name:       "repeated data: the last wins",
		body:       `{"data":[{"__name__":"old"}],"status":"success","data":[{"__name__":"new"}]}`,
		want:       []Shape{{"new", []string{}}},
		wantStatus: "success",
	},
	{
		name:       "label value longer than the buffer",
		body:       `{"status":"success","data":[{"__name__":"up","pod":"` + strings.Repeat("v\\\"", seriesBufSize) + `"}]}`,
		want:       []Shape{{"up", []string{"pod"}}},
		wantStatus: "success",
	},
	{
		name:       "label name longer than the buffer",
		body:       `{"status":"success","data":[{"__name__":"up","` + strings.Repeat("l", 3*seriesBufSize) + `":"v"}]}`,
		want:       []Shape{{"up", []string{strings.Repeat("l", 3*seriesBufSize)}}},
		wantStatus: "success",
	},
	{
		name:       "Prometheus error envelope",
		body:       `{"status":"error","errorType":"bad_data","error":"invalid parameter \"match[]\": 1:3: parse error"}`,
		wantStatus: "error",
	},
	{
		name:    "label name longer than the limit",
		body:    `{"status":"success","data":[{"` + strings.Repeat("l", maxNameBytes+1) + `":"v"}]}`,
		wantErr: "longer than",
	},
	{name: "empty body", body: "", wantErr: "ends early, after 0 bytes"},
	{name: "truncated in a label value", body: `{"status":"success","data":[{"__name__":"up","pod":"ab`, wantErr: "ends early, after 54 bytes"},
	{name: "truncated in an escape", body: `{"status":"success","data":[{"__name__":"up","pod":"a\u00`, wantErr: "ends early"},
	{name: "truncated between series", body: `{"status":"success","data":[{"__name__":"up"},`, wantErr: "ends early"},
	{name: "truncated before the end", body: `{"status":"success","data":[]`, wantErr: "ends early"},
	{name: "truncated in a number", body: `{"status":"success","n":-`, wantErr: "ends early"},
	{name: "truncated in a literal", body: `{"status":"success","n":tr`, wantErr: "ends early"},
	{name: "label value not a string", body: `{"status":"success","data":[{"__name__":"up","pod":1}]}`, wantErr: "label value is not a string"},
	{name: "series not an object", body: `{"status":"success","data":[null]}`, wantErr: "want '{'"},
	{name: "data not a list", body: `{"status":"success","data":{}}`, wantErr: "data is not a list"},
	{name: "invalid escape in a value", body: `{"status":"success","data":[{"pod":"\x"}]}`, wantErr: `invalid escape \x`},
	{name: "invalid unicode escape in a value", body: `{"status":"success","data":[{"pod":"\u12g4"}]}`, wantErr: `invalid \u escape`},
	{name: "invalid escape in a name", body: `{"status":"success","data":[{"p\od":""}]}`, wantErr: "invalid JSON string"},
	{name: "control character in a value", body: "{\"status\":\"success\",\"data\":[{\"pod\":\"a\nb\"}]}", wantErr: "control character"},
	{name: "invalid number", body: `{"status":"success","n":01}`, wantErr: "want ',' or '}'"},
	{name: "data after the response", body: `{"status":"success","data":[]} {}`, wantErr: "data after the end"},
	{name: "not an object", body: `<html>502 Bad Gateway</html>`, wantErr: "got '<', want '{'"},
}

func TestReadSeries(t *testing.T) {
	readers := map[string]func(string) io.Reader{
		"whole":    func(s string) io.Reader { return strings.NewReader(s) },
		"one byte": func(s string) io.Reader { return iotest.OneByteReader(strings.NewReader(s)) },
		"data+EOF": func(s string) io.Reader { return iotest.DataErrReader(strings.NewReader(s)) },
	}
	for _, tt := range seriesCases {
		for rname, reader := range readers {
			t.Run(tt.name+"/"+rname, func(t *testing.T) {
				got, err := Read(reader(tt.body))
				if tt.wantErr != "" {
					if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
						t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				if got.Status != tt.wantStatus {
					t.Errorf("status = %q, want %q", got.Status, tt.wantStatus)
				}
				if !reflect.DeepEqual(got.Shapes, tt.want) {
					t.Errorf("shapes = %q, want %q", got.Shapes, tt.want)
				}
			})
		}
	}
}

func TestReadSeriesTruncatedIsUnexpectedEOF(t *testing.T) {
	_, err := Read(strings.NewReader(`{"status":"success","data":[{"__name__":"up"`))
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("err = %v, want io.ErrUnexpectedEOF", err)
	}
}

func TestReadSeriesReportsReadErrors(t *testing.T) {
	body := io.MultiReader(strings.NewReader(`{"status":"success","data":[`), iotest.ErrReader(errors.New("connection reset")))
	_, err := Read(body)
	if err == nil || !strings.Contains(err.Error(), "reading the response: connection reset") {
		t.Fatalf("err = %v, want the reader's error", err)
	}
}

func TestReadSeriesMemoryGrowsWithShapesNotSeries(t *testing.T) {
	body := seriesBody(10, 2000)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	r, err := Read(bytes.NewReader(body))
	runtime.ReadMemStats(&after)
	if err != nil || len(r.Shapes) != 10 {
		t.Fatalf("got %d shapes, %v; want 10", len(r.Shapes), err)
	}
	if allocs := after.Mallocs - before.Mallocs; allocs > 200 {
		t.Errorf("%d allocations for 20,000 series of 10 shapes, want at most 200", allocs)
	}
	if b := after.TotalAlloc - before.TotalAlloc; b > 128<<10 {
		t.Errorf("%d bytes allocated for a %d-byte body, want at most 128 KiB", b, len(body))
	}
}

// seriesBody is a /api/v1/series response as Prometheus writes it: names x
// sets series, each with the labels a scraped pod metric carries.
func seriesBody(names, sets int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"status":"success","data":[`)
	for i := range names {
		for j := range sets {
			if i > 0 || j > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"__name__":"bench_mem_%04d","instance":"10.244.%d.%d:8080","job":"kubernetes-pods","namespace":"tidal-bench","pod":"web-7d9f8c6b5-%05d"}`, i, j/250, j%250, j)
		}
	}
	b.WriteString(`]}`)
	return b.Bytes()
}

// BenchmarkDecodeSeries compares the streaming decoder with the
// encoding/json Token API decoder it replaced, on 100,000 series of 1,000
// names: go test -bench DecodeSeries -count 6 | benchstat -col /decoder -.
func BenchmarkDecodeSeries(b *testing.B) {
	body := seriesBody(1000, 100)
	decoders := []struct {
		name   string
		decode func(io.Reader) (int, error)
	}{
		{"token", func(r io.Reader) (int, error) {
			shapes, _, _, _, err := tokenDecodeSeries(json.NewDecoder(r))
			return len(shapes), err
		}},
		{"stream", func(r io.Reader) (int, error) {
			res, err := Read(r)
			return len(res.Shapes), err
		}},
	}
	for _, d := range decoders {
		b.Run("decoder="+d.name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				n, err := d.decode(bytes.NewReader(body))
				if err != nil || n != 1000 {
					b.Fatalf("%d shapes, %v", n, err)
				}
			}
		})
	}
}

// FuzzReadSeries checks the decoder against encoding/json: both accept the
// same documents and find the same shapes, whole or a byte at a time.
func FuzzReadSeries(f *testing.F) {
	for _, tt := range seriesCases {
		if len(tt.body) < 4096 {
			f.Add([]byte(tt.body))
		}
	}
	f.Add(seriesBody(3, 2))
	f.Fuzz(func(t *testing.T, body []byte) {
		want, wantErr := referenceSeries(body)
		for _, r := range []io.Reader{bytes.NewReader(body), iotest.OneByteReader(bytes.NewReader(body))} {
			got, err := Read(r)
			if (err != nil) != (wantErr != nil) {
				t.Fatalf("Read(%q) error = %v, encoding/json error = %v", body, err, wantErr)
			}
			if err != nil {
				continue
			}
			if got.Status != want.Status || got.ErrType != want.ErrType || got.ErrMsg != want.ErrMsg {
				t.Errorf("Read(%q) = status %q %q %q, encoding/json %q %q %q", body, got.Status, got.ErrType, got.ErrMsg, want.Status, want.ErrType, want.ErrMsg)
			}
			if len(got.Shapes) != len(want.Shapes) || (len(want.Shapes) > 0 && !reflect.DeepEqual(got.Shapes, want.Shapes)) {
				t.Errorf("Read(%q) = %q, encoding/json %q", body, got.Shapes, want.Shapes)
			}
		}
	})
}

// referenceSeries decodes a series response with encoding/json: the
// document must be valid JSON and an object; for each key the last
// occurrence wins; status, errorType and error count only when strings;
// every "data" must be null or a list of objects whose every value, a
// repeated label's too, is a string.
func referenceSeries(body []byte) (Response, error) {
	var out Response
	if !json.Valid(body) {
		return out, errors.New("invalid JSON")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return out, fmt.Errorf("not an object: %v %v", tok, err)
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return out, err
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return out, err
		}
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			return out, err
		}
		str, _ := v.(string)
		switch tok.(string) {
		case "status":
			out.Status = str
		case "errorType":
			out.ErrType = str
		case "error":
			out.ErrMsg = str
		case "data":
			// Every occurrence of a label must hold a string, even one a
			// later repeat of the key replaces: decoding into
			// map[string]string fails on it, as Read does.
			if err := json.Unmarshal(raw, new([]map[string]string)); err != nil {
				return out, err
			}
			if out.Shapes, err = referenceShapes(v); err != nil {
				return out, err
			}
		}
	}
	return out, nil
}

func referenceShapes(v any) ([]Shape, error) {
	if v == nil {
		return nil, nil
	}
	list, ok := v.([]any)
	if !ok {
		return nil, errors.New("data is not a list")
	}
	var shapes []Shape
	seen := map[string]bool{}
	for _, e := range list {
		m, ok := e.(map[string]any)
		if !ok {
			return nil, errors.New("a series is not an object")
		}
		sh := Shape{Labels: []string{}}
		for k, val := range m {
			s, ok := val.(string)
			if !ok {
				return nil, errors.New("a label value is not a string")
			}
			if k == "__name__" {
				sh.Name = s
				continue
			}
			sh.Labels = append(sh.Labels, k)
		}
		sort.Strings(sh.Labels)
		key, _ := json.Marshal(sh)
		if !seen[string(key)] {
			seen[string(key)] = true
			shapes = append(shapes, sh)
		}
	}
	return shapes, nil
}

// tokenDecodeSeries is the encoding/json Token API decoder readSeries
// replaced, kept as the benchmark's baseline.
func tokenDecodeSeries(dec *json.Decoder) (shapes []Shape, status, errType, errMsg string, err error) {
	if err := tokenExpectDelim(dec, '{'); err != nil {
		return nil, "", "", "", err
	}
	seen := map[string]bool{}
	intern := map[string]string{}
	for dec.More() {
		key, err := tokenString(dec)
		if err != nil {
			return nil, status, errType, errMsg, err
		}
		switch key {
		case "status":
			status, err = tokenString(dec)
		case "errorType":
			errType, err = tokenString(dec)
		case "error":
			errMsg, err = tokenString(dec)
		case "data":
			shapes, err = tokenDecodeData(dec, seen, intern, shapes)
		default:
			var skip json.RawMessage
			err = dec.Decode(&skip)
		}
		if err != nil {
			return nil, status, errType, errMsg, err
		}
	}
	return shapes, status, errType, errMsg, tokenExpectDelim(dec, '}')
}

func tokenDecodeData(dec *json.Decoder, seen map[string]bool, intern map[string]string, shapes []Shape) ([]Shape, error) {
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
		if err := tokenExpectDelim(dec, '{'); err != nil {
			return nil, err
		}
		name := ""
		labels = labels[:0]
		for dec.More() {
			k, err := tokenString(dec)
			if err != nil {
				return nil, err
			}
			v, err := tokenString(dec)
			if err != nil {
				return nil, err
			}
			if k == "__name__" {
				name = v
				continue
			}
			labels = append(labels, k)
		}
		if err := tokenExpectDelim(dec, '}'); err != nil {
			return nil, err
		}
		sort.Strings(labels)
		key := name + "\x00" + strings.Join(labels, "\x00")
		if seen[key] {
			continue
		}
		seen[key] = true
		s := Shape{Name: tokenIntern(intern, name), Labels: make([]string, len(labels))}
		for i, l := range labels {
			s.Labels[i] = tokenIntern(intern, l)
		}
		shapes = append(shapes, s)
	}
	return shapes, tokenExpectDelim(dec, ']')
}

func tokenIntern(m map[string]string, s string) string {
	if v, ok := m[s]; ok {
		return v
	}
	m[s] = s
	return s
}

func tokenExpectDelim(dec *json.Decoder, want json.Delim) error {
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

func tokenString(dec *json.Decoder) (string, error) {
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
