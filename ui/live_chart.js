// One Plotly chart that redraws in place (Plotly.react) when its figure changes.
//
// Streamlit's own st.plotly_chart gives a chart whose figure changed a new element id,
// so every refresh of a live chart unmounted it and drew it anew (Plotly.newPlot, its
// React wrapper and theme included), in each open tab. Plotly.react on the same div
// redraws only what changed. What watching costs a run: figure 9 of bench/results.md.

function loadPlotly(url) {
  // One <script> for the whole page, however many charts ask for it.
  window.__optlabPlotly ??= new Promise((resolve, reject) => {
    if (window.Plotly) {
      resolve(window.Plotly);
      return;
    }
    const script = document.createElement("script");
    script.src = new URL(url, document.baseURI).href;
    script.onload = () => resolve(window.Plotly);
    script.onerror = () => reject(new Error(`Plotly did not load from ${script.src}`));
    document.head.appendChild(script);
  });
  return window.__optlabPlotly;
}

// As st.plotly_chart offers it: the chart alone on the screen, for a demo.
const FULLSCREEN = {
  name: "Fullscreen",
  title: "Fullscreen",
  icon: {
    width: 24,
    height: 24,
    path: "M3 3h7v2H5v5H3zm11 0h7v7h-2V5h-5zM3 14h2v5h5v2H3zm16 0h2v7h-7v-2h5z",
    transform: "matrix(1 0 0 1 0 0)",
  },
  click: (chart) =>
    document.fullscreenElement ? document.exitFullscreen() : chart.requestFullscreen(),
};

// Plotly neither wraps a title nor keeps it clear of the mode bar: a long one was cut at
// the chart's edge ("…and th") and covered by the bar on hover. The bar stands upright
// at the right (see ui/live_chart.py), so a title has the width less this many px.
const MODE_BAR = 36;
const TITLE_TOP = 10; // px above a title of several lines
const measure = document.createElement("canvas").getContext("2d");

function textOf(html) {
  return new DOMParser().parseFromString(html, "text/html").body.textContent;
}

function wrapped(words, width) {
  const lines = [];
  for (const word of words) {
    const last = lines.length ? `${lines[lines.length - 1]} ${word}` : word;
    if (lines.length && measure.measureText(textOf(last)).width <= width) {
      lines[lines.length - 1] = last;
    } else {
      lines.push(word);
    }
  }
  return lines;
}

// The title in lines that fit the chart's width, the chart taller by the lines added, so
// that its plot keeps its height; a title that fits, as it came.
function fitTitle(chart, layout) {
  const title = layout.title ?? {};
  const text = title.text ?? "";
  const size = title.font?.size ?? 16;
  measure.font = `600 ${size}px "Source Sans", sans-serif`;
  const width = chart.clientWidth - MODE_BAR;
  const lines = text.split("<br>");
  if (!text || width <= 0 || lines.every((line) => measure.measureText(textOf(line)).width <= width)) {
    return layout;
  }
  const fitted = wrapped(text.split("<br>").join(" ").split(" "), width);
  const lineHeight = size * 1.3;
  const added = (fitted.length - lines.length) * lineHeight;
  const height = (layout.height ?? 340) + added;
  const raised = (lineHeight * (fitted.length - 1)) / 2; // Plotly centres a title's lines
  return {
    ...layout,
    height,
    margin: { ...layout.margin, t: (layout.margin?.t ?? 40) + added },
    title: {
      ...title,
      text: fitted.join("<br>"),
      yref: "container",
      y: 1 - (TITLE_TOP + raised) / height,
      yanchor: "top",
    },
  };
}

// A figure that is a legend alone (a view's one legend: ui/presentation.py), as tall as
// its entries take at the chart's width, which only the browser knows.
const LEGEND_ONLY = "legend only";
const LEGEND_SPACE = 8; // px under the legend

// Its entries' whole height: an SVG box leaves out clipping, so a legend that Plotly cut to
// the figure's height (with a scroll bar) measures whole.
async function fitLegend(Plotly, chart) {
  const legend = chart.querySelector(".legend");
  if (!legend) return; // nothing to say: no entry
  const top = legend.getBoundingClientRect().top - chart.getBoundingClientRect().top;
  chart.fittedHeight = Math.ceil(top + legend.getBBox().height) + LEGEND_SPACE;
  if (Math.abs(chart.fittedHeight - chart._fullLayout.height) > 1) {
    await Plotly.relayout(chart, { height: chart.fittedHeight });
  }
}

function draw(chart) {
  const { figure, config, plotly } = chart.latest;
  const legendOnly = figure.layout.meta === LEGEND_ONLY;
  const layout = fitTitle(chart, { ...figure.layout });
  chart.classList.toggle("optlab-legend", legendOnly); // not a chart, to a test's eye
  if (legendOnly && chart.fittedHeight) {
    layout.height = chart.fittedHeight; // as last fitted: a redraw does not jump
  }
  if (document.fullscreenElement === chart) {
    layout.height = window.innerHeight;
  }
  // In order: a figure that arrives while the last one is drawn waits for it.
  chart.drawn = (chart.drawn ?? Promise.resolve())
    .then(() => loadPlotly(plotly))
    .then(async (Plotly) => {
      chart.drawnWidth = chart.clientWidth;
      if (!legendOnly) {
        return Plotly.react(chart, figure.data, layout, config);
      }
      await Plotly.react(chart, figure.data, layout, { ...config, displayModeBar: false });
      return fitLegend(Plotly, chart);
    })
    .catch((error) => {
      chart.textContent = String(error);
    });
}

export default function ({ parentElement, data }) {
  let chart = parentElement.querySelector(".optlab-chart");
  if (!chart) {
    chart = document.createElement("div");
    chart.className = "optlab-chart";
    chart.style.width = "100%";
    parentElement.appendChild(chart);
    // The column's width changes with the window and the sidebar: fit it once drawn.
    // Only while it is on screen: Streamlit takes a chart out of the page (another group
    // of charts picked) before its cleanup below disconnects this, the observer then
    // sees it shrink to nothing, and Plotly refuses to resize a chart out of the page
    // ("Resize must be passed a displayed plot div element", an uncaught error each).
    chart.resized = new ResizeObserver(() => {
      if (chart._fullLayout && chart.isConnected && chart.clientWidth > 0) {
        if (chart.clientWidth !== chart.drawnWidth) {
          draw(chart); // the title is wrapped again to the new width
        } else {
          window.Plotly.Plots.resize(chart);
        }
      }
    });
    chart.resized.observe(chart);
    chart.addEventListener("fullscreenchange", () => draw(chart));
  }
  chart.latest = {
    figure: JSON.parse(data.figure),
    config: { ...data.config, modeBarButtonsToAdd: [FULLSCREEN] },
    plotly: data.plotly,
  };
  draw(chart);
  return () => {
    chart.resized.disconnect();
    window.Plotly?.purge(chart);
    chart.remove();
  };
}
