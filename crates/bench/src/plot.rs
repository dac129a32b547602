//! Line charts as SVG: one or more named curves against a common x axis.
//! The benchmarks that draw their figures ([`crate::mux`], and scripts
//! through `ninep bench plot`) share this.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result, anyhow, bail};
use plotters::prelude::*;

/// A chart: labels and curves of (x, y) points.
#[derive(Debug, Clone, Default)]
pub struct Chart {
    /// The caption above the chart; empty for none.
    pub title: String,
    /// The x axis's label.
    pub x: String,
    /// The y axis's label.
    pub y: String,
    /// Curves by label, each drawn in order of x.
    pub curves: Vec<(String, Vec<(f64, f64)>)>,
}

impl Chart {
    /// Writes the chart to `path` as SVG.
    pub fn svg(&self, path: &Path) -> Result<()> {
        let points = self.curves.iter().flat_map(|c| c.1.iter());
        let (xmax, ymax) = points.fold((1.0f64, 1.0f64), |(x, y), p| (x.max(p.0), y.max(p.1)));
        let root = SVGBackend::new(path, (640, 400)).into_drawing_area();
        let err = |e: &dyn std::fmt::Display| anyhow!("{}: {e}", path.display());
        root.fill(&WHITE).map_err(|e| err(&e))?;
        let mut chart = ChartBuilder::on(&root)
            .caption(&self.title, ("sans-serif", 20))
            .margin(10)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(0.0..xmax * 1.05, 0.0..ymax * 1.1)
            .map_err(|e| err(&e))?;
        chart
            .configure_mesh()
            .x_desc(&self.x)
            .y_desc(&self.y)
            .draw()
            .map_err(|e| err(&e))?;
        for (i, (label, points)) in self.curves.iter().enumerate() {
            let colour = Palette99::pick(i).to_rgba();
            let mut points = points.clone();
            points.sort_by(|a, b| a.0.total_cmp(&b.0));
            chart
                .draw_series(LineSeries::new(points.clone(), colour))
                .map_err(|e| err(&e))?
                .label(label)
                .legend(move |(x, y)| PathElement::new([(x, y), (x + 16, y)], colour));
            chart
                .draw_series(points.iter().map(|&p| Circle::new(p, 3, colour.filled())))
                .map_err(|e| err(&e))?;
        }
        if self.curves.len() > 1 {
            chart
                .configure_series_labels()
                .background_style(WHITE.mix(0.8))
                .border_style(BLACK)
                .draw()
                .map_err(|e| err(&e))?;
        }
        root.present().map_err(|e| err(&e))?;
        Ok(())
    }

    /// A chart from CSV text with a header line: one curve per distinct
    /// value of column `by`, plotting column `y` against column `x`; rows
    /// are kept only where every `col=value` of `only` holds, and where x
    /// and y are numbers.
    pub fn from_csv(
        text: &str,
        x: &str,
        y: &str,
        by: &str,
        only: &[(String, String)],
    ) -> Result<Chart> {
        let mut lines = text.lines();
        let header: Vec<&str> = lines.next().context("empty CSV")?.split(',').collect();
        let column = |name: &str| {
            header
                .iter()
                .position(|h| h.trim() == name)
                .with_context(|| format!("no column {name:?} in {header:?}"))
        };
        let (xi, yi, byi) = (column(x)?, column(y)?, column(by)?);
        let filters = only
            .iter()
            .map(|(c, v)| Ok((column(c)?, v.as_str())))
            .collect::<Result<Vec<_>>>()?;
        let mut curves: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
        for line in lines {
            let cells: Vec<&str> = line.split(',').map(str::trim).collect();
            if filters.iter().any(|(i, v)| cells.get(*i) != Some(v)) {
                continue;
            }
            let number = |i: usize| cells.get(i).and_then(|c| c.parse::<f64>().ok());
            if let (Some(px), Some(py), Some(label)) = (number(xi), number(yi), cells.get(byi)) {
                curves.entry(label.to_string()).or_default().push((px, py));
            }
        }
        if curves.is_empty() {
            bail!("no rows to plot");
        }
        Ok(Chart {
            title: String::new(),
            x: x.to_owned(),
            y: y.to_owned(),
            curves: curves.into_iter().collect(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn curves_from_csv() {
        let csv = "rtt,size,client,mbs\n0,100,stream,450\n50,100,stream,430\n0,100,http,444\n\
                   0,1024,stream,9\n50,100,http,x\n";
        let only = [("size".to_owned(), "100".to_owned())];
        let chart = Chart::from_csv(csv, "rtt", "mbs", "client", &only).unwrap();
        assert_eq!(
            chart.curves,
            [
                ("http".to_owned(), vec![(0.0, 444.0)]),
                ("stream".to_owned(), vec![(0.0, 450.0), (50.0, 430.0)]),
            ]
        );
        assert!(Chart::from_csv(csv, "rtt", "nope", "client", &[]).is_err());
        let dir = std::env::temp_dir().join(format!("ninep-plot-{}.svg", std::process::id()));
        chart.svg(&dir).unwrap();
        let svg = std::fs::read_to_string(&dir).unwrap();
        let _ = std::fs::remove_file(&dir);
        assert!(svg.starts_with("<svg") && svg.contains("stream") && svg.contains("http"));
    }
}
