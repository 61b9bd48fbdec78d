// Draws each overview chart with uPlot (served by Posthorn from node_modules) from its data-chart
// attribute: {buckets: [ms...], series: {sent: [...], ...}}.
'use strict';
(function () {
  var COLORS = { sent: '#2563eb', delivered: '#16a34a', deferred: '#ca8a04', failed: '#dc2626', bounced: '#9333ea', opened: '#0891b2', clicked: '#db2777' };
  document.querySelectorAll('[data-chart]').forEach(function (el) {
    var data = JSON.parse(el.getAttribute('data-chart'));
    var names = Object.keys(data.series);
    var dark = window.matchMedia && window.matchMedia('(prefers-color-scheme: dark)').matches;
    var axis = { stroke: dark ? '#b0b0ab' : '#555', grid: { stroke: dark ? '#34363a' : '#e5e5e2' }, ticks: { stroke: dark ? '#34363a' : '#e5e5e2' } };
    var opts = {
      width: Math.max(280, el.clientWidth),
      height: 220,
      series: [{ label: 'Time (UTC)' }].concat(names.map(function (n) { return { label: n, stroke: COLORS[n] || '#888', width: 2 }; })),
      axes: [Object.assign({ label: 'UTC' }, axis), axis],
      scales: { x: { time: true } },
      // The times of every dashboard page are UTC (docs/dashboard.md, "Times"): so are the charts'.
      tzDate: function (ts) { return uPlot.tzDate(new Date(ts * 1000), 'Etc/UTC'); },
    };
    var columns = [data.buckets.map(function (ms) { return ms / 1000; })].concat(names.map(function (n) { return data.series[n]; }));
    var plot = new uPlot(opts, columns, el);
    window.addEventListener('resize', function () { plot.setSize({ width: Math.max(280, el.clientWidth), height: 220 }); });
  });
})();
