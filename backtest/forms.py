"""The review form: a verdict on one backtest, posted from the proposal page."""

from django import forms

from .models import ApprovalVerdict


class ReviewForm(forms.Form):
    backtest = forms.IntegerField(widget=forms.HiddenInput)
    verdict = forms.ChoiceField(choices=ApprovalVerdict.choices, widget=forms.RadioSelect)
    comment = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), required=False)


class CommentForm(forms.Form):
    body = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), max_length=20_000, label="Comment")
    backtest = forms.IntegerField(widget=forms.HiddenInput, required=False, min_value=1, max_value=2_147_483_647)
    task = forms.IntegerField(widget=forms.HiddenInput, required=False, min_value=1, max_value=2_147_483_647)
