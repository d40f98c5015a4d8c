"""The review form: a verdict on one backtest, posted from the proposal page."""

from django import forms

from .models import ApprovalVerdict


class ReviewForm(forms.Form):
    backtest = forms.IntegerField(widget=forms.HiddenInput)
    verdict = forms.ChoiceField(choices=ApprovalVerdict.choices, widget=forms.RadioSelect)
    comment = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), required=False)
