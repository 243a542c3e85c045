"""The forensic questions: the Finding model and vocabulary, the detections and their runner."""
