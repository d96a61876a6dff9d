import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { Resvg } from '@resvg/resvg-js';
import { parse, View } from 'vega';
import { compile, type TopLevelSpec } from 'vega-lite';

/** One bar: a metric of a pairing in a scenario. */
export interface ChartPoint {
  scenario: string;
  metric: string;
  pairing: string;
  value: number;
}

// Shipped with the benchmark, so the chart has its text on a machine with no fonts installed.
const fontDir = join(dirname(createRequire(import.meta.url).resolve('dejavu-fonts-ttf/package.json')), 'ttf');

/** A PNG grid of bar charts: a row per metric, a column per scenario, a bar per pairing. */
export async function renderChart(points: ChartPoint[], title: string): Promise<Buffer> {
  // Rows, columns and bars in the order the points come in (vega-lite would sort them by name).
  const order = (key: 'scenario' | 'metric' | 'pairing') => [...new Set(points.map((p) => p[key]))];
  const spec: TopLevelSpec = {
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    title: { text: title, anchor: 'start', fontSize: 15 },
    data: { values: points },
    config: { font: 'DejaVu Sans' },
    facet: {
      row: { field: 'metric', type: 'nominal', title: null, sort: order('metric'), header: { labelAngle: 0, labelAlign: 'left', labelFontSize: 12 } },
      column: { field: 'scenario', type: 'nominal', title: null, sort: order('scenario'), header: { labelFontSize: 12 } },
    },
    spec: {
      width: 170,
      height: 95,
      layer: [
        {
          mark: 'bar',
          encoding: {
            color: { field: 'pairing', type: 'nominal', sort: order('pairing'), legend: { orient: 'bottom', title: 'frontend + worker', columns: 2 } },
          },
        },
        { mark: { type: 'text', dy: -6, fontSize: 9 }, encoding: { text: { field: 'value', type: 'quantitative', format: '.3~r' } } },
      ],
      encoding: {
        x: { field: 'pairing', type: 'nominal', sort: order('pairing'), axis: null },
        y: { field: 'value', type: 'quantitative', title: null, axis: { tickCount: 4 } },
      },
    },
    resolve: { scale: { y: 'independent' } },
  };
  return toPng(spec);
}

/** One reading of a series: `metric` of `series` at `t`. */
export interface SeriesPoint {
  metric: string;
  series: string;
  /** Minutes since the start. */
  t: number;
  value: number;
}

/** A PNG column of line charts over time: a row per metric (each its own scale), a line per series. */
export async function renderLines(points: SeriesPoint[], title: string): Promise<Buffer> {
  const order = (key: 'metric' | 'series') => [...new Set(points.map((p) => p[key]))];
  return toPng({
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    title: { text: title, anchor: 'start', fontSize: 15 },
    data: { values: points },
    config: { font: 'DejaVu Sans' },
    facet: { row: { field: 'metric', type: 'nominal', title: null, sort: order('metric'), header: { labelAngle: 0, labelAlign: 'left', labelFontSize: 12 } } },
    spec: {
      width: 640,
      height: 110,
      mark: { type: 'line', strokeWidth: 1.5 },
      encoding: {
        x: { field: 't', type: 'quantitative', title: 'minutes' },
        y: { field: 'value', type: 'quantitative', title: null, axis: { tickCount: 4 } },
        color: { field: 'series', type: 'nominal', sort: order('series'), legend: { orient: 'bottom', title: null, columns: 5 } },
      },
    },
    resolve: { scale: { y: 'independent' } },
  });
}

/** Renders a vega-lite spec to PNG with the shipped fonts. */
async function toPng(spec: TopLevelSpec): Promise<Buffer> {
  const view = new View(parse(compile(spec).spec), { renderer: 'none' });
  const svg = await view.toSVG();
  view.finalize();
  const fonts = ['DejaVuSans.ttf', 'DejaVuSans-Bold.ttf'].map((f) => join(fontDir, f));
  return new Resvg(svg, {
    background: 'white',
    fitTo: { mode: 'zoom', value: 2 },
    font: { fontFiles: fonts, loadSystemFonts: false, defaultFontFamily: 'DejaVu Sans' },
  })
    .render()
    .asPng();
}
