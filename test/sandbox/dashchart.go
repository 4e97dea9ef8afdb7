package sandbox

import (
	"image/color"
	"math"
	"sort"
	"strings"
	"time"
)

// dashboardRow is the dashboard row the report draws: the autoscaler's
// own panels (replicas, metric value against target, scale events).
const dashboardRow = "Autoscalers"

const dashboardTitle = "The chart's Grafana dashboard over the run: row " + dashboardRow + " (" + Namespace + "/" + App + ")"

var palette = []color.RGBA{blue, orange, green, red, purple, black, grey,
	{0x8c, 0x56, 0x4b, 0xff}, {0x17, 0xbe, 0xcf, 0xff}, {0xbc, 0xbd, 0x22, 0xff}}

// DashboardHTML draws the row's time series panels as inline SVG.
func DashboardHTML(d *DashboardResult, samples []Sample) []byte {
	return svgPage(dashboardTitle, func(c canvas) { drawDashboard(c, d, samples) })
}

// DashboardPNG draws the row's time series panels as a PNG image.
func DashboardPNG(d *DashboardResult, samples []Sample) ([]byte, error) {
	return pngOf(func(c canvas) { drawDashboard(c, d, samples) })
}

// dashboardPanels turns the row's time series panels into chart panels,
// each query's series resampled at the samples' times.
func dashboardPanels(d *DashboardResult, samples []Sample) []panel {
	if d == nil {
		return nil
	}
	var out []panel
	byTitle := map[string]int{}
	for _, r := range d.Results {
		q := r.Query
		if q.Row != dashboardRow || q.Type != "timeseries" {
			continue
		}
		i, ok := byTitle[q.Panel]
		if !ok {
			i = len(out)
			byTitle[q.Panel] = i
			out = append(out, panel{title: q.Panel, legendInside: true})
		}
		for _, s := range r.Series {
			ys := resample(s.Points, samples)
			name := strings.TrimSpace(strings.TrimPrefix(strings.TrimPrefix(Legend(q.Legend, s.Labels), Namespace+"/"+App+" "), App+" "))
			k := len(out[i].series)
			out[i].series = append(out[i].series, series{name: name, c: palette[k%len(palette)], dashed: strings.HasSuffix(name, "target"), ys: ys})
		}
	}
	for i := range out {
		out[i].ymax = panelMax(out[i].series)
	}
	return out
}

// resample gives each sample the last point at or before its time, NaN
// when there is none within a few seconds (no data then).
func resample(points []Point, samples []Sample) []float64 {
	ys := make([]float64, len(samples))
	k := 0
	for i, s := range samples {
		for k+1 < len(points) && points[k+1].T <= s.T {
			k++
		}
		ys[i] = math.NaN()
		if len(points) > 0 && points[k].T <= s.T && s.T-points[k].T <= 3*time.Second {
			ys[i] = points[k].V
		}
	}
	return ys
}

// panelMax is the y range: the largest value, unless one series dwarfs the
// others (a queue of thousands beside a 60% target), then 1.5 times the
// second largest so the others stay readable; the big one is clipped.
func panelMax(ss []series) float64 {
	var maxes []float64
	for _, s := range ss {
		maxes = append(maxes, maxOf(s.ys))
	}
	sort.Float64s(maxes)
	switch n := len(maxes); {
	case n == 0:
		return 1
	case n > 1 && maxes[n-2] > 0 && maxes[n-1] > 3*maxes[n-2]:
		return niceMax(1.5 * maxes[n-2])
	default:
		return niceMax(math.Max(maxes[n-1], 1))
	}
}

func drawDashboard(c canvas, d *DashboardResult, samples []Sample) {
	c.rect(0, 0, chartW, chartH, white)
	c.text(marginL, 28, dashboardTitle, black, left)
	panels := dashboardPanels(d, samples)
	if len(samples) == 0 || len(panels) == 0 {
		c.text(chartW/2, chartH/2, "no dashboard data", black, middle)
		return
	}
	n := len(samples)
	xs := make([]float64, n)
	tmax := math.Max(samples[n-1].T.Seconds(), 1)
	for i, s := range samples {
		xs[i] = marginL + (chartW-marginL-marginR)*s.T.Seconds()/tmax
	}
	for i, p := range panels[:min(len(panels), 3)] {
		drawPanel(c, p, samples, xs, tmax, firstPanelY+float64(i)*(panelH+panelGap), i == 0)
	}
}
