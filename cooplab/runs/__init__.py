"""The engine below the command line: run configurations, the runner, run directories, sweeps
and their executors, calibration and the task registry. It never imports the command line."""
