"""The audit log's filter: project, action, actor and a date range, each optional."""

from __future__ import annotations

from django import forms


class AuditFilterForm(forms.Form):
    project = forms.ChoiceField(required=False)
    action = forms.ChoiceField(required=False)
    actor = forms.CharField(required=False, label="Actor (username)")
    since = forms.DateField(
        required=False, label="From", widget=forms.DateInput(attrs={"type": "date"})
    )
    until = forms.DateField(
        required=False, label="To", widget=forms.DateInput(attrs={"type": "date"})
    )

    def __init__(self, *args, projects: list[str], actions: list[str], **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["project"].choices = [("", "all")] + [(s, s) for s in projects]
        self.fields["action"].choices = [("", "all")] + [(a, a) for a in actions]
