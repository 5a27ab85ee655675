// The Playground's chart (ui/playground_chart.py): a race over a surface, drawn in place
// (Plotly.react) as the knobs move, played without a rerun, and clicked for a start.
//
// The figure (core/charts/playground.py) holds each path whole and names the steps of
// its frames in its slider; each frame here is every trace whose meta is "animated" cut
// at the frame's step (the first column of its customdata). Play and Pause are buttons
// of the figure that Plotly leaves to this file ("skip"). A click on the surface's plot
// sets the component's state "start"; the step shown when a play or a drag ends sets
// "step", and a play started sets "play" (its first frame), where the page asks for it
// (`report`: a room's presenter, whom viewers follow: their charts play it too).

const ANIMATED = "animated";
const PLAY = "▶ Play";
const PAUSE = "❚❚ Pause";

// Plotly's bundle sets window.Plotly as it runs; ui/live_chart.js loads the same file
// under the same promise, so a page of both loads it once.
function plotly(url) {
  window.__optlabPlotly ??= import(new URL(url, document.baseURI).href).then(() => window.Plotly);
  return window.__optlabPlotly;
}

// Plotly's Python side sends a NumPy array as its bytes in base64 ({dtype, bdata, shape});
// the chart takes plain arrays (a 2-D one as an array of rows).
const TYPED = {
  f8: Float64Array, f4: Float32Array, i1: Int8Array, u1: Uint8Array,
  i2: Int16Array, u2: Uint16Array, i4: Int32Array, u4: Uint32Array,
};

function plain(value) {
  if (!value?.bdata) return value;
  const bytes = Uint8Array.from(atob(value.bdata), (c) => c.charCodeAt(0));
  const flat = Array.from(new TYPED[value.dtype](bytes.buffer));
  const columns = value.shape ? Number(String(value.shape).split(",")[1] ?? 1) : 1;
  if (columns === 1) return flat;
  return Array.from({ length: flat.length / columns }, (_, i) => flat.slice(i * columns, (i + 1) * columns));
}

// The number of a trace's points at or before `step` (its customdata's first column rises).
function upTo(trace, step) {
  let n = 0;
  while (n < trace.customdata.length && trace.customdata[n][0] <= step) n += 1;
  return n;
}

function framesOf(figure) {
  const animated = figure.data
    .map((trace, index) => [trace, index])
    .filter(([trace]) => trace.meta === ANIMATED);
  const names = figure.layout.sliders?.[0]?.steps.map((s) => s.args[0][0]) ?? [];
  return names.map((name) => ({
    name,
    traces: animated.map(([, index]) => index),
    data: animated.map(([trace]) => {
      const n = upTo(trace, Number(name));
      return { x: trace.x.slice(0, n), y: trace.y.slice(0, n), customdata: trace.customdata.slice(0, n) };
    }),
  }));
}

const STILL = { mode: "immediate", frame: { duration: 0, redraw: false }, transition: { duration: 0 } };

function show(chart, name) {
  chart.frameName = name;
  return window.Plotly.animate(chart, [name], STILL);
}

// The frame a play started now begins with: the one after the frame shown, or the first
// from the last.
function nextFrame(chart) {
  const names = chart.frameNames;
  const at = names.indexOf(chart.frameName);
  return at < 0 || at === names.length - 1 ? names[0] : names[at + 1];
}

function play(chart, first) {
  const names = chart.frameNames;
  chart.playing = true;
  window.Plotly.animate(chart, names.slice(Math.max(names.indexOf(first), 0)), {
    mode: "immediate",
    frame: { duration: chart.latest.frame_ms, redraw: false },
    transition: { duration: 0 },
  });
}

// The step shown, to the page: once a play or a drag of the slider ends, if asked.
function report(chart) {
  chart.playing = false;
  const step = Number(chart.frameName);
  if (chart.latest.report && step !== chart.reported) {
    chart.reported = step;
    chart.setStateValue("step", step);
  }
}

// A play started here, to the page, if asked: the room's viewers play it too.
function announce(chart, first) {
  if (chart.latest.report) {
    chart.played = Date.now(); // not to play it again when the page sends it back
    chart.setStateValue("play", { from: Number(first), at: chart.played });
  }
}

function listen(chart) {
  chart.on("plotly_click", (event) => {
    const point = event.points?.[0];
    if (point && (point.data.xaxis ?? "x") === "x") {
      chart.setStateValue("start", { x: point.x, y: point.y, at: Date.now() });
    }
  });
  chart.on("plotly_buttonclicked", (event) => {
    if (event.button.label === PLAY) {
      const first = nextFrame(chart);
      play(chart, first);
      announce(chart, first);
    }
    if (event.button.label === PAUSE) window.Plotly.animate(chart, [null], STILL);
  });
  chart.on("plotly_animatingframe", (event) => {
    chart.frameName = event.name;
  });
  chart.on("plotly_sliderchange", (event) => {
    chart.frameName = event.step.args[0][0];
  });
  for (const ended of ["plotly_animated", "plotly_animationinterrupted", "plotly_sliderend"]) {
    chart.on(ended, () => report(chart));
  }
}

async function draw(chart, data) {
  const Plotly = await plotly(data.plotly);
  const asked = data.step === null ? null : String(data.step);
  if (data.figure !== chart.figureText) {
    const figure = JSON.parse(data.figure);
    for (const trace of figure.data) {
      for (const key of ["x", "y", "customdata"]) trace[key] = plain(trace[key]);
    }
    const frames = framesOf(figure);
    chart.frameNames = frames.map((frame) => frame.name);
    await Plotly.react(chart, { data: figure.data, layout: figure.layout, frames, config: data.config });
    if (!chart.listening) {
      listen(chart);
      chart.listening = true;
    }
    chart.figureText = data.figure;
    chart.frameName = chart.frameNames[chart.frameNames.length - 1];
    chart.asked = undefined; // the figure came anew: go to the step asked, whatever it is
  }
  // A play the presenter started since this chart first drew (one from before it came
  // is over): played here too, from the same frame.
  const played = data.play?.at ?? null;
  if (chart.played === undefined) {
    chart.played = played;
  } else if (played !== chart.played) {
    chart.played = played;
    if (chart.frameNames.includes(String(data.play.from))) play(chart, String(data.play.from));
  }
  // A step asked anew (a presenter's, followed): shown, but the last one while a play
  // runs to it (where the presenter's play ended, seconds before this one's); the same
  // one again leaves a viewer's own play or drag where it is.
  if (asked !== chart.asked) {
    chart.asked = asked;
    const last = chart.frameNames[chart.frameNames.length - 1];
    const ending = chart.playing && asked === last;
    if (asked !== null && chart.frameNames.includes(asked) && !ending) await show(chart, asked);
  }
}

export default function ({ parentElement, data, setStateValue }) {
  let chart = parentElement.querySelector(".optlab-playground");
  if (!chart) {
    chart = document.createElement("div");
    chart.className = "optlab-playground";
    chart.style.width = "100%";
    parentElement.appendChild(chart);
    chart.resized = new ResizeObserver(() => {
      if (chart._fullLayout && chart.isConnected && chart.clientWidth > 0) {
        window.Plotly.Plots.resize(chart);
      }
    });
    chart.resized.observe(chart);
  }
  chart.latest = data;
  chart.setStateValue = setStateValue;
  // In order: a figure that arrives while the last one is drawn waits for it.
  chart.drawn = (chart.drawn ?? Promise.resolve())
    .then(() => draw(chart, data))
    .catch((error) => {
      chart.textContent = String(error);
    });
  return () => {
    chart.resized.disconnect();
    window.Plotly?.purge(chart);
    chart.remove();
  };
}
