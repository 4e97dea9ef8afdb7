package sandbox

import (
	"bytes"
	"fmt"
	"html"
	"image"
	"image/color"
	"image/png"
	"math"
	"strings"
	"unicode"
)

// The chart is laid out once against a small canvas interface and drawn
// twice: as inline SVG (chart.html) and as a raster image (chart.png), with
// the standard library only.

type anchor int

const (
	left anchor = iota
	middle
	right
)

type canvas interface {
	rect(x, y, w, h float64, fill color.RGBA)
	polyline(xs, ys []float64, c color.RGBA, width float64, dashed bool)
	text(x, y float64, s string, c color.RGBA, a anchor)
}

var (
	black  = color.RGBA{0x22, 0x22, 0x22, 0xff}
	grey   = color.RGBA{0x99, 0x99, 0x99, 0xff}
	light  = color.RGBA{0xe6, 0xe6, 0xe6, 0xff}
	white  = color.RGBA{0xff, 0xff, 0xff, 0xff}
	shadeA = color.RGBA{0xf4, 0xf6, 0xfa, 0xff}
	shadeB = color.RGBA{0xff, 0xff, 0xff, 0xff}
	blue   = color.RGBA{0x1f, 0x77, 0xb4, 0xff}
	orange = color.RGBA{0xff, 0x7f, 0x0e, 0xff}
	green  = color.RGBA{0x2c, 0xa0, 0x2c, 0xff}
	red    = color.RGBA{0xd6, 0x27, 0x28, 0xff}
	purple = color.RGBA{0x94, 0x67, 0xbd, 0xff}
)

const (
	chartW, chartH = 1100.0, 780.0
	marginL        = 70.0
	marginR        = 20.0
	panelH         = 190.0
	panelGap       = 60.0
	firstPanelY    = 60.0
)

type series struct {
	name   string
	c      color.RGBA
	dashed bool
	ys     []float64 // NaN: no value
}

type panel struct {
	title  string
	ymax   float64
	series []series
	// ref draws a dashed horizontal line at this value when > 0.
	ref float64
	// legendInside lists the series inside the panel, for long names.
	legendInside bool
}

// drawChart lays the samples out on c.
func drawChart(c canvas, samples []Sample, title string) {
	c.rect(0, 0, chartW, chartH, white)
	c.text(marginL, 28, title, black, left)
	if len(samples) == 0 {
		c.text(chartW/2, chartH/2, "no samples", black, middle)
		return
	}
	n := len(samples)
	xs := make([]float64, n)
	tmax := math.Max(samples[n-1].T.Seconds(), 1)
	plotW := chartW - marginL - marginR
	for i, s := range samples {
		xs[i] = marginL + plotW*s.T.Seconds()/tmax
	}
	col := func(f func(Sample) float64) []float64 {
		out := make([]float64, n)
		for i, s := range samples {
			out[i] = f(s)
		}
		return out
	}
	ratio := func(v, t float64) float64 {
		if math.IsNaN(v) || t == 0 {
			return math.NaN()
		}
		return v / t
	}
	demand := col(func(s Sample) float64 { return s.Demand })
	capacity := col(func(s Sample) float64 { return float64(s.Ready) * podCapacity })
	queue := col(func(s Sample) float64 { return s.Queue })
	cpu := col(func(s Sample) float64 { return ratio(s.CPU, s.CPUTarget) })
	rps := col(func(s Sample) float64 { return ratio(s.RPS, s.RPSTarget) })
	qm := col(func(s Sample) float64 { return ratio(s.QueueM, s.QueueTgt) })
	spec := col(func(s Sample) float64 { return float64(s.Spec) })
	readyN := col(func(s Sample) float64 { return float64(s.Ready) })
	desired := col(func(s Sample) float64 {
		if s.Desired == 0 { // not reported yet (the demo's minimum is 1)
			return math.NaN()
		}
		return float64(s.Desired)
	})
	panels := []panel{
		{title: "Load (requests/s; queued jobs)", ymax: niceMax(maxOf(demand, capacity, queue)), series: []series{
			{"demand req/s", blue, false, demand},
			{"capacity of ready pods", grey, true, capacity},
			{"queue length", orange, false, queue},
		}},
		{title: "Metrics as current/target (1 = on target)", ymax: math.Min(niceMax(math.Max(maxOf(cpu, rps, qm), 1.5)), 6), ref: 1, series: []series{
			{"cpu utilization", red, false, cpu},
			{"http req/s per pod", green, false, rps},
			{"queue per pod (external)", purple, false, qm},
		}},
		{title: "Replicas", ymax: niceMax(math.Max(maxOf(spec, readyN, desired), 4)), series: []series{
			{"ready pods", blue, false, readyN},
			{"deployment replicas", black, false, spec},
			{"desired (autoscaler)", orange, true, desired},
		}},
	}
	for i, p := range panels {
		top := firstPanelY + float64(i)*(panelH+panelGap)
		drawPanel(c, p, samples, xs, tmax, top, i == 0)
	}
	// Bars under the load panel while Prometheus was stopped, and under
	// the replicas panel while the Fallback condition was True.
	loadBottom := firstPanelY + panelH
	replicasBottom := firstPanelY + 2*(panelH+panelGap) + panelH
	spanBars(c, samples, xs, loadBottom, red, "prometheus stopped", func(s Sample) bool { return s.PromDown })
	spanBars(c, samples, xs, replicasBottom, orange, "fallback", func(s Sample) bool { return strings.HasPrefix(s.Fallback, "True/") })
}

// spanBars draws a labelled bar just above y over each run of samples
// for which on is true.
func spanBars(c canvas, samples []Sample, xs []float64, y float64, col color.RGBA, label string, on func(Sample) bool) {
	for i := 0; i < len(samples); i++ {
		if !on(samples[i]) {
			continue
		}
		j := i
		for j+1 < len(samples) && on(samples[j+1]) {
			j++
		}
		c.rect(xs[i], y-6, math.Max(xs[j]-xs[i], 2), 5, col)
		c.text(xs[i]+2, y-10, label, col, left)
		i = j
	}
}

func drawPanel(c canvas, p panel, samples []Sample, xs []float64, tmax, top float64, phases bool) {
	plotW := chartW - marginL - marginR
	bottom := top + panelH
	// Phase bands.
	start, shade := 0, false
	for i := 1; i <= len(samples); i++ {
		if i < len(samples) && samples[i].Phase == samples[start].Phase {
			continue
		}
		x0 := xs[start]
		x1 := xs[i-1]
		if i < len(samples) {
			x1 = xs[i]
		}
		fill := shadeA
		if shade {
			fill = shadeB
		}
		c.rect(x0, top, x1-x0, panelH, fill)
		if phases {
			c.text((x0+x1)/2, top+14, samples[start].Phase, grey, middle)
		}
		shade = !shade
		start = i
	}
	c.text(marginL, top-8, p.title, black, left)
	if p.legendInside {
		for i, s := range p.series {
			ly := top + 34 + 14*float64(i)
			c.polyline([]float64{marginL + 8, marginL + 22}, []float64{ly - 4, ly - 4}, s.c, 3, s.dashed)
			c.text(marginL+28, ly, s.name, s.c, left)
		}
	}
	// Legend, right-aligned above the panel.
	lx := chartW - marginR
	for i := len(p.series) - 1; i >= 0 && !p.legendInside; i-- {
		s := p.series[i]
		w := float64(len(s.name))*8 + 8
		c.text(lx, top-8, s.name, s.c, right)
		lx -= w
		c.polyline([]float64{lx - 18, lx - 4}, []float64{top - 12, top - 12}, s.c, 3, s.dashed)
		lx -= 30
	}
	y := func(v float64) float64 { return bottom - panelH*v/p.ymax }
	// Grid and axis labels.
	for k := 0; k <= 4; k++ {
		v := p.ymax * float64(k) / 4
		c.polyline([]float64{marginL, marginL + plotW}, []float64{y(v), y(v)}, light, 1, false)
		c.text(marginL-6, y(v)+4, trimNum(v), black, right)
	}
	step := niceStep(tmax / 8)
	for t := 0.0; t <= tmax+1e-9; t += step {
		x := marginL + plotW*t/tmax
		c.polyline([]float64{x, x}, []float64{bottom, bottom + 4}, black, 1, false)
		c.text(x, bottom+18, fmt.Sprintf("%ss", trimNum(t)), black, middle)
	}
	c.polyline([]float64{marginL, marginL, marginL + plotW}, []float64{top, bottom, bottom}, black, 1, false)
	if p.ref > 0 {
		c.polyline([]float64{marginL, marginL + plotW}, []float64{y(p.ref), y(p.ref)}, grey, 1.5, true)
	}
	for _, s := range p.series {
		var px, py []float64
		flush := func() {
			if len(px) > 0 {
				c.polyline(px, py, s.c, 2, s.dashed)
			}
			px, py = nil, nil
		}
		for i, v := range s.ys {
			if math.IsNaN(v) {
				flush()
				continue
			}
			px = append(px, xs[i])
			py = append(py, y(math.Min(v, p.ymax)))
		}
		flush()
	}
}

func maxOf(cols ...[]float64) float64 {
	m := 0.0
	for _, col := range cols {
		for _, v := range col {
			if !math.IsNaN(v) && v > m {
				m = v
			}
		}
	}
	return m
}

// niceMax rounds up to 1, 2, 4, 5 or 8 times a power of ten (quarters stay short).
func niceMax(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 4, 5, 8, 10} {
		if v <= m*p {
			return m * p
		}
	}
	return 10 * p
}

func niceStep(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*p {
			return m * p
		}
	}
	return 10 * p
}

func trimNum(v float64) string {
	s := fmt.Sprintf("%.2f", v)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	return s
}

// svgCanvas writes SVG elements.
type svgCanvas struct{ b bytes.Buffer }

func rgb(c color.RGBA) string { return fmt.Sprintf("#%02x%02x%02x", c.R, c.G, c.B) }

func (s *svgCanvas) rect(x, y, w, h float64, fill color.RGBA) {
	fmt.Fprintf(&s.b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"/>`+"\n", x, y, w, h, rgb(fill))
}

func (s *svgCanvas) polyline(xs, ys []float64, c color.RGBA, width float64, dashed bool) {
	var pts strings.Builder
	for i := range xs {
		fmt.Fprintf(&pts, "%.1f,%.1f ", xs[i], ys[i])
	}
	dash := ""
	if dashed {
		dash = ` stroke-dasharray="6,4"`
	}
	fmt.Fprintf(&s.b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="%.1f"%s/>`+"\n", strings.TrimSpace(pts.String()), rgb(c), width, dash)
}

func (s *svgCanvas) text(x, y float64, str string, c color.RGBA, a anchor) {
	anchors := map[anchor]string{left: "start", middle: "middle", right: "end"}
	fmt.Fprintf(&s.b, `<text x="%.1f" y="%.1f" fill="%s" text-anchor="%s">%s</text>`+"\n", x, y, rgb(c), anchors[a], html.EscapeString(str))
}

// ChartHTML returns a self-contained HTML page with the chart as inline SVG.
func ChartHTML(samples []Sample, title string) []byte {
	return svgPage(title, func(c canvas) { drawChart(c, samples, title) })
}

// svgPage draws on an SVG canvas in a self-contained HTML page.
func svgPage(title string, draw func(canvas)) []byte {
	s := &svgCanvas{}
	draw(s)
	var b bytes.Buffer
	fmt.Fprintf(&b, `<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>%s</title>
<style>body{font-family:sans-serif;margin:16px} svg text{font-family:sans-serif;font-size:12px}</style>
</head><body>
<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f">
%s</svg>
</body></html>
`, html.EscapeString(title), chartW, chartH, chartW, chartH, s.b.String())
	return b.Bytes()
}

// rasterCanvas draws into an RGBA image.
type rasterCanvas struct{ img *image.RGBA }

func (r *rasterCanvas) set(x, y int, c color.RGBA) {
	if image.Pt(x, y).In(r.img.Rect) {
		r.img.SetRGBA(x, y, c)
	}
}

func (r *rasterCanvas) rect(x, y, w, h float64, fill color.RGBA) {
	for j := int(math.Round(y)); j < int(math.Round(y+h)); j++ {
		for i := int(math.Round(x)); i < int(math.Round(x+w)); i++ {
			r.set(i, j, fill)
		}
	}
}

func (r *rasterCanvas) polyline(xs, ys []float64, c color.RGBA, width float64, dashed bool) {
	half := (width - 1) / 2
	travelled := 0.0
	for i := 1; i < len(xs); i++ {
		dx, dy := xs[i]-xs[i-1], ys[i]-ys[i-1]
		l := math.Hypot(dx, dy)
		steps := int(math.Ceil(l * 2))
		for k := 0; k <= steps; k++ {
			f := 0.0
			if steps > 0 {
				f = float64(k) / float64(steps)
			}
			if dashed && math.Mod(travelled+f*l, 10) >= 6 {
				continue
			}
			px, py := xs[i-1]+dx*f, ys[i-1]+dy*f
			for oy := -half; oy <= half+1e-9; oy++ {
				for ox := -half; ox <= half+1e-9; ox++ {
					r.set(int(math.Round(px+ox)), int(math.Round(py+oy)), c)
				}
			}
		}
		travelled += l
	}
}

// text draws with font3x5 at scale 2: 8 pixels per character, 10 high;
// y is the baseline.
func (r *rasterCanvas) text(x, y float64, s string, c color.RGBA, a anchor) {
	const scale = 2
	w := float64(len(s) * 4 * scale)
	switch a {
	case middle:
		x -= w / 2
	case right:
		x -= w
	}
	x0, y0 := int(math.Round(x)), int(math.Round(y))-5*scale
	for i, ch := range strings.ToUpper(s) {
		g, ok := font3x5[unicode.ToUpper(ch)]
		if !ok {
			g = font3x5['?']
		}
		for row := 0; row < 5; row++ {
			for col := 0; col < 3; col++ {
				if g[row][col] != '#' {
					continue
				}
				for sy := 0; sy < scale; sy++ {
					for sx := 0; sx < scale; sx++ {
						r.set(x0+i*4*scale+col*scale+sx, y0+row*scale+sy, c)
					}
				}
			}
		}
	}
}

// ChartPNG returns the chart as a PNG image.
func ChartPNG(samples []Sample, title string) ([]byte, error) {
	return pngOf(func(c canvas) { drawChart(c, samples, title) })
}

// pngOf draws on a raster canvas and encodes it.
func pngOf(draw func(canvas)) ([]byte, error) {
	r := &rasterCanvas{img: image.NewRGBA(image.Rect(0, 0, int(chartW), int(chartH)))}
	draw(r)
	var b bytes.Buffer
	if err := png.Encode(&b, r.img); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
