package seriesjson

import (
	"encoding/json"
	"fmt"
	"io"
	"unicode/utf8"
)

// The JSON layer of seriesScanner: buffered input, strings, and values
// skipped without being kept.

// more reads more input after buf[pos:n], moving it to the front of the
// buffer first, and growing the buffer only when it is full of unread
// input (a long name). It reports whether it read anything.
func (s *seriesScanner) more() bool {
	if s.rerr != nil {
		return false
	}
	if s.pos > 0 {
		copy(s.buf, s.buf[s.pos:s.n])
		s.off += int64(s.pos)
		s.n -= s.pos
		s.pos = 0
	}
	if s.n == len(s.buf) {
		if len(s.buf) >= maxNameBytes {
			s.rerr = fmt.Errorf("a string at byte %d is longer than %d bytes", s.off, maxNameBytes)
			return false
		}
		s.buf = append(s.buf, make([]byte, len(s.buf))...)
	}
	for range 100 {
		m, err := s.r.Read(s.buf[s.n:])
		s.n += m
		if err != nil {
			s.rerr = err
		}
		if m > 0 {
			return true
		}
		if err != nil {
			return false
		}
	}
	s.rerr = io.ErrNoProgress
	return false
}

// inputErr is why input ended: a truncated body, or the reader's error.
func (s *seriesScanner) inputErr() error {
	if s.rerr == io.EOF {
		return fmt.Errorf("the response ends early, after %d bytes: %w", s.off+int64(s.n), io.ErrUnexpectedEOF)
	}
	return fmt.Errorf("reading the response: %w", s.rerr)
}

func (s *seriesScanner) syntax(what string) error {
	return fmt.Errorf("invalid JSON at byte %d: %s", s.off+int64(s.pos), what)
}

// peek skips whitespace and returns the next byte without consuming it.
func (s *seriesScanner) peek() (byte, error) {
	for {
		for s.pos < s.n {
			switch c := s.buf[s.pos]; c {
			case ' ', '\t', '\n', '\r':
				s.pos++
			default:
				return c, nil
			}
		}
		if !s.more() {
			return 0, s.inputErr()
		}
	}
}

// peekRaw returns the next byte as is; false at the end of input.
func (s *seriesScanner) peekRaw() (byte, bool) {
	if s.pos < s.n || s.more() {
		return s.buf[s.pos], true
	}
	return 0, false
}

func (s *seriesScanner) expect(want byte) error {
	c, err := s.peek()
	if err != nil {
		return err
	}
	if c != want {
		return s.syntax(fmt.Sprintf("got %q, want %q", c, want))
	}
	s.pos++
	return nil
}

// Strings.

// strClass classifies string bytes: 0 plain ASCII, and the rest below.
var strClass = func() (t [256]uint8) {
	for c := range 0x20 {
		t[c] = clsControl
	}
	t['"'] = clsQuote
	t['\\'] = clsEscape
	for c := 0x80; c < 0x100; c++ {
		t[c] = clsHigh
	}
	return t
}()

const (
	clsPlain = iota
	clsQuote
	clsEscape
	clsControl
	clsHigh
)

// str reads a string and returns its value, valid until the next read.
// Plain strings (no escape, valid UTF-8) are returned from the buffer;
// others are unescaped by encoding/json, so that both agree on every
// escape and on invalid UTF-8.
func (s *seriesScanner) str() ([]byte, error) {
	c, err := s.peek()
	if err != nil {
		return nil, err
	}
	if c != '"' {
		return nil, s.syntax(fmt.Sprintf("got %q, want a string", c))
	}
	i := 1 // from s.pos, which stays on the opening quote
	plain, high := true, false
	for {
		for s.pos+i < s.n {
			switch strClass[s.buf[s.pos+i]] {
			case clsPlain:
				i++
				continue
			case clsQuote:
				raw := s.buf[s.pos : s.pos+i+1]
				s.pos += i + 1
				if plain && (!high || utf8.Valid(raw)) {
					return raw[1 : len(raw)-1], nil
				}
				return s.unquote(raw)
			case clsEscape:
				plain = false
				i += 2 // the escaped byte cannot end the string
				continue
			case clsControl:
				s.pos += i
				return nil, s.syntax("control character in a string")
			case clsHigh:
				high = true
				i++
			}
		}
		if !s.more() {
			return nil, s.inputErr()
		}
	}
}

func (s *seriesScanner) unquote(raw []byte) ([]byte, error) {
	var v string
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, fmt.Errorf("invalid JSON string before byte %d: %w", s.off+int64(s.pos), err)
	}
	s.scratch = append(s.scratch[:0], v...)
	return s.scratch, nil
}

// skipString consumes a string without keeping it, checking its escapes.
func (s *seriesScanner) skipString() error {
	s.pos++ // the opening quote, seen by the caller
	for {
		for s.pos < s.n {
			switch strClass[s.buf[s.pos]] {
			case clsPlain, clsHigh:
				s.pos++
			case clsQuote:
				s.pos++
				return nil
			case clsEscape:
				if err := s.skipEscape(); err != nil {
					return err
				}
			case clsControl:
				return s.syntax("control character in a string")
			}
		}
		if !s.more() {
			return s.inputErr()
		}
	}
}

// skipEscape consumes one escape sequence, at the backslash.
func (s *seriesScanner) skipEscape() error {
	s.pos++
	c, ok := s.peekRaw()
	if !ok {
		return s.inputErr()
	}
	s.pos++
	switch c {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return nil
	case 'u':
		for range 4 {
			h, ok := s.peekRaw()
			if !ok {
				return s.inputErr()
			}
			if !isHex(h) {
				return s.syntax("invalid \\u escape")
			}
			s.pos++
		}
		return nil
	}
	s.pos--
	return s.syntax(fmt.Sprintf("invalid escape \\%c", c))
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// Other values, skipped.

// skipValue consumes any JSON value at nesting depth depth-1.
func (s *seriesScanner) skipValue(depth int) error {
	c, err := s.peek()
	if err != nil {
		return err
	}
	switch {
	case c == '"':
		return s.skipString()
	case c == '{' || c == '[':
		return s.skipContainer(depth + 1)
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	case c == '-' || '0' <= c && c <= '9':
		return s.skipNumber()
	}
	return s.syntax(fmt.Sprintf("unexpected %q", c))
}

func (s *seriesScanner) skipContainer(depth int) error {
	if depth > maxDepth {
		return s.syntax("nested too deeply")
	}
	closing := byte(']')
	if s.buf[s.pos] == '{' {
		closing = '}'
	}
	s.pos++
	c, err := s.peek()
	if err != nil {
		return err
	}
	if c == closing {
		s.pos++
		return nil
	}
	for {
		if closing == '}' {
			if _, err := s.str(); err != nil {
				return err
			}
			if err := s.expect(':'); err != nil {
				return err
			}
		}
		if err := s.skipValue(depth); err != nil {
			return err
		}
		more, err := s.next(closing)
		if err != nil || !more {
			return err
		}
	}
}

func (s *seriesScanner) literal(word string) error {
	for i := range len(word) {
		c, ok := s.peekRaw()
		if !ok {
			return s.inputErr()
		}
		if c != word[i] {
			return s.syntax(fmt.Sprintf("invalid literal, want %s", word))
		}
		s.pos++
	}
	return nil
}

// skipNumber consumes a number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *seriesScanner) skipNumber() error {
	if c, _ := s.peekRaw(); c == '-' {
		s.pos++
	}
	c, ok := s.peekRaw()
	switch {
	case !ok:
		return s.inputErr()
	case c == '0':
		s.pos++
	case '1' <= c && c <= '9':
		s.digits()
	default:
		return s.syntax("invalid number")
	}
	if c, _ := s.peekRaw(); c == '.' {
		s.pos++
		if err := s.someDigits(); err != nil {
			return err
		}
	}
	if c, _ := s.peekRaw(); c == 'e' || c == 'E' {
		s.pos++
		if c, _ := s.peekRaw(); c == '+' || c == '-' {
			s.pos++
		}
		return s.someDigits()
	}
	return nil
}

func (s *seriesScanner) digits() int {
	n := 0
	for {
		c, ok := s.peekRaw()
		if !ok || c < '0' || c > '9' {
			return n
		}
		s.pos++
		n++
	}
}

func (s *seriesScanner) someDigits() error {
	if s.digits() > 0 {
		return nil
	}
	if _, ok := s.peekRaw(); !ok {
		return s.inputErr()
	}
	return s.syntax("invalid number")
}
