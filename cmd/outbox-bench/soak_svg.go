package main

import (
	"bufio"
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
)

// svgPanel is one small chart of a soak run: lines against time.
type svgPanel struct {
	title string
	// logY draws the values on a logarithmic scale (latencies, whose p50 and p99 lie
	// orders of magnitude apart); values <= 0 are then left out.
	logY  bool
	lines []svgLine
	// marks are times (minutes) drawn as vertical dashed lines, named markName: when
	// autovacuum ran.
	marks    []float64
	markName string
}

// svgLine is one series: Y at X minutes. A NaN or infinite Y leaves a gap.
type svgLine struct {
	name string
	x, y []float64
}

// The panel layout, in SVG user units (pixels).
const (
	svgPanelW  = 470
	svgPlotH   = 160
	svgMarginL = 62
	svgMarginR = 26
	svgTitleH  = 26
	svgAxisH   = 32
	svgLegendH = 14
	svgHeaderH = 40
	svgCharW   = 6.2 // the rough width of a character of the legend, for its columns
)

// svgColors are the lines' colours, in order; past them the dash pattern changes.
var svgColors = []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"}

// soakPanels builds the charts of a run from its samples: latencies, rows per status,
// sizes, PostgreSQL's dead tuples (with autovacuum runs), the poll statement (and, from
// pg_stat_statements, the slowest of every kind of poll statement on the server), RSS
// and goroutines. A chart without data (dead tuples and the server's times off
// PostgreSQL) is left out.
func soakPanels(run soakRun) []svgPanel {
	// pick makes a line of every series that keep accepts, with a point per sample. A
	// series missing from a sample is a gap, except a status with no rows, which is 0
	// there (as soakSlopes counts it).
	pick := func(keep func(name, unit string) bool) []svgLine {
		var lines []svgLine
		index := make(map[string]int)
		for _, s := range run.Samples {
			for _, p := range s.series() {
				if _, ok := index[p.name]; !ok && keep(p.name, p.unit) {
					index[p.name] = len(lines)
					lines = append(lines, svgLine{name: p.name})
				}
			}
		}
		for _, s := range run.Samples {
			values := make(map[string]float64)
			for _, p := range s.series() {
				values[p.name] = p.value
			}
			for i := range lines {
				v, ok := values[lines[i].name]
				if !ok {
					v = math.NaN()
					if strings.HasPrefix(lines[i].name, "rows ") {
						v = 0
					}
				}
				lines[i].x = append(lines[i].x, s.T/60)
				lines[i].y = append(lines[i].y, v)
			}
		}
		return lines
	}
	named := func(names ...string) func(string, string) bool {
		return func(n, _ string) bool {
			for _, want := range names {
				if n == want {
					return true
				}
			}
			return false
		}
	}
	panels := []svgPanel{
		{title: "latency over each sample interval, ms (log scale)", logY: true,
			lines: pick(named("commit p50", "commit p99", "listener p50", "listener p99"))},
		{title: "rows per status", lines: pick(func(n, _ string) bool { return strings.HasPrefix(n, "rows ") })},
		{title: "sizes on disk, MiB", lines: pick(func(n, unit string) bool { return unit == "MiB" && n != "RSS" })},
	}
	dead := svgPanel{title: "dead tuples (pg_stat_user_tables)", lines: pick(named("dead tuples")), markName: "autovacuum"}
	var last int64 = -1
	for _, s := range run.Samples {
		if s.PG == nil {
			continue
		}
		if last >= 0 && s.PG.Autovacuums > last {
			dead.marks = append(dead.marks, s.T/60)
		}
		last = s.PG.Autovacuums
	}
	if len(dead.lines) > 0 {
		panels = append(panels, dead)
	}
	panels = append(panels, svgPanel{title: "poll statement from the head and from the low-water mark, ms", lines: pick(named("poll statement", "poll from the low-water mark"))})
	server := svgPanel{title: "every poll statement on the server (pg_stat_statements), slowest per interval, ms",
		lines: pick(func(n, _ string) bool { return strings.HasPrefix(n, "poll ") && strings.HasSuffix(n, ", server max") })}
	if len(server.lines) > 0 {
		panels = append(panels, server)
	}
	return append(panels,
		svgPanel{title: "RSS, MiB", lines: pick(named("RSS"))},
		svgPanel{title: "goroutines", lines: pick(named("goroutines"))},
		svgPanel{title: "machine CPU busy, % of all cores", lines: pick(named("machine CPU busy"))})
}

// writeSoakSVGFile writes run's charts to path, creating its directory.
func writeSoakSVGFile(path string, run soakRun) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	title := fmt.Sprintf("outbox-bench soak, %s: %d events/s for %s, purge retention %s (every %s), sampled every %s",
		run.DB, run.TargetRate, run.Duration, run.Retention, run.PurgeInterval, run.SampleInterval)
	if err := writeSoakSVG(f, title, soakPanels(run)); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// writeSoakSVG draws panels, two a row, under title, as one SVG document.
func writeSoakSVG(w io.Writer, title string, panels []svgPanel) error {
	bw := bufio.NewWriter(w)
	heights := make([]int, len(panels))
	rowH := make([]int, (len(panels)+1)/2)
	for i, p := range panels {
		entries := len(p.lines)
		if len(p.marks) > 0 {
			entries++
		}
		perRow := legendColumns(p)
		rows := max((entries+perRow-1)/perRow, 1)
		heights[i] = svgTitleH + svgPlotH + svgAxisH + rows*svgLegendH + 8
		rowH[i/2] = max(rowH[i/2], heights[i])
	}
	width := 2 * svgPanelW
	height := svgHeaderH
	for _, h := range rowH {
		height += h
	}
	fmt.Fprintf(bw, `<?xml version="1.0" encoding="UTF-8"?>`+"\n")
	fmt.Fprintf(bw, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="11">`+"\n",
		width, height, width, height)
	fmt.Fprintf(bw, `<rect width="%d" height="%d" fill="white"/>`+"\n", width, height)
	fmt.Fprintf(bw, `<text x="10" y="24" font-size="14" font-weight="bold">%s</text>`+"\n", svgEscape(title))
	y := svgHeaderH
	for i, p := range panels {
		x := (i % 2) * svgPanelW
		writeSVGPanel(bw, p, x, y)
		if i%2 == 1 || i == len(panels)-1 {
			y += rowH[i/2]
		}
	}
	fmt.Fprintln(bw, "</svg>")
	return bw.Flush()
}

// writeSVGPanel draws one panel with its top left corner at (x0, y0).
func writeSVGPanel(w io.Writer, p svgPanel, x0, y0 int) {
	plotW := float64(svgPanelW - svgMarginL - svgMarginR)
	left, top := float64(x0+svgMarginL), float64(y0+svgTitleH)
	bottom := top + svgPlotH
	fmt.Fprintf(w, `<g><text x="%d" y="%d" font-weight="bold">%s</text>`+"\n", x0+svgMarginL, y0+18, svgEscape(p.title))
	fmt.Fprintf(w, `<rect x="%.1f" y="%.1f" width="%.1f" height="%d" fill="none" stroke="#999"/>`+"\n", left, top, plotW, svgPlotH)

	// The ranges: time from 0, values from 0 (log: from the smallest positive value's
	// decade), each at least a little wide so that a flat series draws.
	xMax, yMin, yMax := 0.0, math.Inf(1), math.Inf(-1)
	for _, l := range p.lines {
		for i, v := range l.y {
			if !finite(v) || !finite(l.x[i]) || (p.logY && v <= 0) {
				continue
			}
			xMax = max(xMax, l.x[i])
			yMin, yMax = min(yMin, v), max(yMax, v)
		}
	}
	for _, m := range p.marks {
		xMax = max(xMax, m)
	}
	if xMax <= 0 {
		xMax = 1
	}
	xStep := niceStep(xMax, 5)
	xMax = math.Ceil(xMax/xStep-1e-9) * xStep
	if math.IsInf(yMax, -1) { // no data
		yMin, yMax = 0, 1
		fmt.Fprintf(w, `<text x="%.1f" y="%.1f" fill="#999" text-anchor="middle">no data</text>`+"\n", left+plotW/2, top+svgPlotH/2)
	}
	var ty func(float64) float64
	var yTicks []float64
	if p.logY {
		lo, hi := math.Floor(math.Log10(yMin)), math.Ceil(math.Log10(yMax))
		if hi <= lo {
			hi = lo + 1
		}
		ty = func(v float64) float64 { return bottom - (math.Log10(v)-lo)/(hi-lo)*svgPlotH }
		for e := lo; e <= hi; e++ {
			yTicks = append(yTicks, math.Pow(10, e))
		}
	} else {
		lo := min(0, yMin)
		hi := yMax * 1.05
		if hi <= lo {
			hi = lo + 1
		}
		step := niceStep(hi-lo, 4)
		lo = math.Floor(lo/step) * step
		hi = math.Ceil(hi/step-1e-9) * step
		ty = func(v float64) float64 { return bottom - (v-lo)/(hi-lo)*svgPlotH }
		for i := 0; lo+float64(i)*step <= hi+step/2; i++ {
			yTicks = append(yTicks, lo+float64(i)*step)
		}
	}
	tx := func(v float64) float64 { return left + v/xMax*plotW }
	for _, v := range yTicks {
		yy := ty(v)
		fmt.Fprintf(w, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#eee"/>`+"\n", left, yy, left+plotW, yy)
		fmt.Fprintf(w, `<text x="%.1f" y="%.1f" text-anchor="end">%s</text>`+"\n", left-4, yy+4, svgEscape(svgNumber(v)))
	}
	for i := 0; float64(i)*xStep <= xMax+xStep/2; i++ {
		v := float64(i) * xStep
		fmt.Fprintf(w, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", tx(v), bottom+14, svgEscape(svgNumber(v)))
	}
	fmt.Fprintf(w, `<text x="%.1f" y="%.1f" text-anchor="middle" fill="#555">minutes</text>`+"\n", left+plotW/2, bottom+27)
	for _, m := range p.marks {
		fmt.Fprintf(w, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#888" stroke-dasharray="2,3"/>`+"\n", tx(m), top, tx(m), bottom)
	}
	for i, l := range p.lines {
		color, dash := svgStyle(i)
		for _, seg := range svgSegments(l, p.logY) {
			var pts strings.Builder
			for j, pt := range seg {
				if j > 0 {
					pts.WriteByte(' ')
				}
				fmt.Fprintf(&pts, "%.1f,%.1f", tx(pt[0]), ty(pt[1]))
			}
			fmt.Fprintf(w, `<polyline fill="none" stroke="%s" stroke-width="1.5"%s points="%s"><title>%s</title></polyline>`+"\n",
				color, dash, pts.String(), svgEscape(l.name))
		}
	}
	// The legend, under the axis.
	entries := len(p.lines)
	perRow := legendColumns(p)
	for i := 0; i <= entries; i++ {
		name := p.markName
		var swatch string
		lx := float64(x0+svgMarginL) + float64(i%perRow)*(plotW/float64(perRow))
		ly := bottom + svgAxisH + float64(i/perRow)*svgLegendH + 6
		if i < entries {
			color, dash := svgStyle(i)
			name = p.lines[i].name
			swatch = fmt.Sprintf(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2"%s/>`, lx, ly-4, lx+16, ly-4, color, dash)
		} else if len(p.marks) > 0 {
			swatch = fmt.Sprintf(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#888" stroke-dasharray="2,3"/>`, lx+8, ly-10, lx+8, ly+2)
		} else {
			break
		}
		fmt.Fprintf(w, "%s<text x=\"%.1f\" y=\"%.1f\">%s</text>\n", swatch, lx+20, ly, svgEscape(name))
	}
	fmt.Fprintln(w, "</g>")
}

// legendColumns is how many legend entries of p fit side by side: as many columns as
// the longest name allows, at most 4.
func legendColumns(p svgPanel) int {
	longest := len(p.markName)
	for _, l := range p.lines {
		longest = max(longest, len(l.name))
	}
	plotW := float64(svgPanelW - svgMarginL - svgMarginR)
	return min(max(int(plotW/(24+svgCharW*float64(longest))), 1), 4)
}

// niceStep is a round tick step (1, 2, 2.5 or 5 times a power of ten) that cuts span
// into about n parts.
func niceStep(span float64, n int) float64 {
	if span <= 0 || !finite(span) {
		return 1
	}
	raw := span / float64(n)
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 2.5, 5} {
		if m*mag >= raw {
			return m * mag
		}
	}
	return 10 * mag
}

// svgSegments splits a line into runs of drawable points: a NaN, an infinity or, on a
// log scale, a value <= 0 ends a run.
func svgSegments(l svgLine, logY bool) [][][2]float64 {
	var segs [][][2]float64
	var cur [][2]float64
	for i, v := range l.y {
		if !finite(v) || !finite(l.x[i]) || (logY && v <= 0) {
			if len(cur) > 0 {
				segs = append(segs, cur)
			}
			cur = nil
			continue
		}
		cur = append(cur, [2]float64{l.x[i], v})
	}
	if len(cur) > 0 {
		segs = append(segs, cur)
	}
	return segs
}

// svgStyle is line i's colour and dash attribute.
func svgStyle(i int) (color, dash string) {
	color = svgColors[i%len(svgColors)]
	if i >= len(svgColors) {
		dash = ` stroke-dasharray="5,2"`
	}
	return color, dash
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// svgNumber formats an axis label: three significant digits, thousands as k and
// millions as M, whole numbers below 10,000 in full.
func svgNumber(v float64) string {
	switch a := math.Abs(v); {
	case a >= 1e6:
		return fmt.Sprintf("%.3gM", v/1e6)
	case a >= 1e4:
		return fmt.Sprintf("%.3gk", v/1e3)
	case a >= 1 && a == math.Trunc(a):
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.3g", v)
}

// svgEscape escapes s for XML text and attribute values.
func svgEscape(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s)) // a strings.Builder does not fail
	return b.String()
}
